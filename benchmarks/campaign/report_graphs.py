"""The README's tables of the `graphs` and `graphs-short` steps (`python -m benchmarks graphs`): eager against
whole-step CUDA graphs per method and batch size, the shard end to end, and the issue-43 targets."""

from __future__ import annotations

from typing import Any

from benchmarks.campaign.formatting import DASH, fixed, pct, real, sig, table

def graphs_lines(result: dict[str, Any]) -> list[str]:
    """Per case: eager and graphed ms/step and seq/s, the speed-up, the longest capture, the extra memory, the
    busy shares and the loss agreement; then the shard end to end when it ran."""
    rows = []
    for case in result.get("cases") or []:
        busy = case.get("gpu_busy_share") or {}
        agreement = (case.get("loss_agreement") or {}).get("max_abs_difference")
        rows.append([case.get("method", "?"), str(case.get("batch_size", "?")), sig(case.get("eager_ms_per_step")),
                     sig(case.get("graphed_ms_per_step")), sig(case.get("eager_seq_per_s")),
                     sig(case.get("graphed_seq_per_s")), f"{sig(case.get('speedup'))}×",
                     fixed(case.get("max_capture_seconds"), 2), fixed(case.get("extra_memory_mib"), 0),
                     f"{pct(busy.get('eager'))} / {pct(busy.get('graphed'))}",
                     f"{agreement:.2g}" if real(agreement) else DASH])
    lines = [f"{result.get('encoder', '?')} on {result.get('dataset', '?')}, max length {result.get('max_length', '?')}"
             f", {result.get('steps', '?')} batches a round", "",
             *table(["method", "batch", "eager ms/step", "graphed ms/step", "eager seq/s", "graphed seq/s",
                     "speed-up", "capture (s, max)", "extra MiB", "GPU busy eager / graphed",
                     "loss Δ (dropout off)"], rows)]
    shard = result.get("shard")
    if shard:
        off, auto = shard.get("off") or {}, shard.get("auto") or {}
        lines += [f"One {shard.get('method', '?')} shard end to end: training {fixed(off.get('train_seconds'), 1)} s "
                  f"eager, {fixed(auto.get('train_seconds'), 1)} s with graphs ({sig(shard.get('train_speedup'))}×); "
                  f"wall {fixed(off.get('wall_seconds'), 1)} s vs {fixed(auto.get('wall_seconds'), 1)} s; test "
                  f"accuracy {fixed(off.get('test_accuracy'), 4)} vs {fixed(auto.get('test_accuracy'), 4)} (rows "
                  f"say `{auto.get('cuda_graphs', '?')}`)", ""]
    if result.get("note"):
        lines += [f"_{result['note']}_", ""]
    return lines


def graphs_targets(result: dict[str, Any], why_not: str | None) -> list[list[str]]:
    """The issue-43 target rows of one `graphs` step: each case with a target, measured and met; `why_not` (a CPU,
    a dry run) replaces the verdict."""
    rows = []
    for case in result.get("cases") or []:
        if "target_speedup" not in case and why_not is None:
            continue
        target = case.get("target_speedup")
        label = (f"CUDA graphs: {result.get('encoder', '?')} {case.get('method', '?')} batch {case.get('batch_size')}"
                 + (f" ≥ {target:g}× eager, capture < 5 s" if target is not None else ""))
        met = why_not or ("✅ met" if case.get("target_met") else "❌ not met")
        rows.append([label, f"{sig(case.get('speedup'))}×, {fixed(case.get('max_capture_seconds'), 2)} s", met])
    return rows
