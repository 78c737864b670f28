"""`report DIR...`: the README's GPU section, in Markdown, from the JSON records `run PART --out OUT` wrote (one
per part, often in several folders). A part in several records (a step re-run with `--only STEP`) is merged per
step name: the latest record (by "started") where the step ran ok, else the latest. The section names the
device(s), versions and dates, says loudly when it shows a dry run, then per part its tables, the commands behind
them and the steps that did not run ok; a figure a record lacks prints as —. Light imports only (no torch)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from bench.errors import BenchError
from benchmarks.campaign.formatting import DASH, fixed, pct, real, sig, table, verdict
from benchmarks.campaign.report_graphs import graphs_lines, graphs_targets
from benchmarks.campaign.parts import PARTS
from bench.reporting.collapsed import collapsed_keys

METHODS = ("ce", "clld-adaptive")           # the methods of `report`'s throughput table
SHORT_TEXT_RATIO = 3.0                      # new / old that the fast path should reach on short texts (GPU)
SHORT_TEXT_DATASETS = ("trec", "mr")
COMPILE_LIMIT_S = 60.0                      # compile time of each method (GPU)
ON_CPU = "not applicable: a GPU target (this ran on a CPU)"
ON_DRY_RUN = "not applicable: a GPU target (this was a dry run at toy scale)"
TOP_OPS = 5
PAPER_COLUMNS = (  # (heading, evaluator, metric): the CSV's rows averaged per method; clean ones on split test
    ("test accuracy", "clean", "accuracy"), ("test macro-F1", "clean", "macro_f1"),
    ("TF accuracy under attack", "textfooler", "accuracy_under_attack"),
    ("TF success rate", "textfooler", "attack_success_rate"), ("contrast accuracy", "contrast", "contrast_accuracy"))


def render(paths: list[Path]) -> str:
    """The Markdown GPU section from the campaign records in `paths` (folders, or record files)."""
    records = load_records(paths)
    parts = merge_parts(records)
    lines = header(records)
    for name in sorted(parts, key=lambda n: (list(PARTS).index(n) if n in PARTS else len(PARTS), n)):
        record = parts[name]
        dry = " (dry run)" if any(r.get("dry_run") for r in record["_records"]) else ""
        lines += ["", f"### {name}{dry}", ""]
        if name == "perf":
            lines += perf_section(record)
        elif name == "tests":
            lines += tests_section(record)
        elif name.startswith("paper:"):
            lines += paper_section(record)
        lines += footer(record)
    return "\n".join(lines).rstrip() + "\n"


def load_records(paths: list[Path]) -> list[dict[str, Any]]:
    """The campaign records (each with `_path` added) in the folders (and their sub-folders) and files of `paths`,
    oldest first; a BenchError when there is none."""
    files: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            files += sorted(path.glob("*.json")) + sorted(path.glob("*/*.json"))
        elif path.is_file():
            files.append(path)
    records = []
    for file in {f.resolve(): f for f in files}.values():
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and "campaign" in data and "part" in data:
            records.append({**data, "_path": file})
    if not records:
        raise BenchError(f"no campaign records in {', '.join(str(p) for p in paths) or 'no path'}; give the "
                         "folders `run --out` wrote")
    return sorted(records, key=lambda r: (str(r.get("started") or ""), str(r["_path"])))


def merge_parts(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """One record per part: the latest record's facts with, per step name, the step of the latest record in
    which it ran ok (else of the latest); each step carries its record as `_record`, the part its records as
    `_records`. `records` must be oldest first."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        groups.setdefault(str(record["part"]), []).append(record)
    merged: dict[str, dict[str, Any]] = {}
    for part, group in groups.items():
        chosen: dict[str, dict[str, Any]] = {}
        for record in group:
            for step in record.get("steps") or []:
                before = chosen.get(step.get("name"))
                if before is None or step.get("status") == "ok" or before.get("status") != "ok":
                    chosen[step.get("name")] = {**step, "_record": record}
        known = [s.name for s in PARTS[part].steps] if part in PARTS else []
        order = [n for n in known if n in chosen] + sorted(n for n in chosen if n not in known)
        merged[part] = {**group[-1], "steps": [chosen[n] for n in order], "_records": group}
    return merged


def header(records: list[dict[str, Any]]) -> list[str]:
    """The heading (the devices), the versions and dates, and the dry-run warning."""
    def distinct(key: str, cut: int | None = None) -> str:
        return ", ".join(sorted({str(r[key])[:cut] for r in records if r.get(key)})) or "none"

    lines = [f"## GPU campaign: {distinct('device_name')}", "",
             f"torch {distinct('torch')}, CUDA {distinct('cuda')}, Python {distinct('python')}; run on "
             f"{distinct('started', 10)} ({len(records)} record(s))"]
    for device in sorted({str(r.get("device_name")) for r in records if r.get("dry_run")}):
        lines += ["", f"> **⚠️ dry run at toy scale on {device}: not GPU figures**"]
    return lines


def not_run(step: dict[str, Any] | None, name: str) -> str:
    """Why a step has no figures."""
    status = str(step.get("status")) if step else ""
    said = "did not run" if step is None else {"timeout": "timed out", "skipped": "was skipped"}.get(status, status)
    return f"not measured: the {name} step {said}"


def result_of(steps: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    """A perf step's JSON report ({} when it has none)."""
    result = (steps.get(name) or {}).get("result")
    return result if isinstance(result, dict) else {}


def perf_section(record: dict[str, Any]) -> list[str]:
    """Throughput and MFU, the targets, compile, short texts, shards, shard cost and profile."""
    steps = {s["name"]: s for s in record["steps"]}
    lines = step_block(steps, "Throughput and MFU", "report", throughput_table)
    lines += ["**Targets**", "", *targets_table(steps)]
    for title, name, render_step in (
            ("CUDA graphs", "graphs", graphs_lines), ("CUDA graphs, short texts", "graphs-short", graphs_lines),
            ("Compile", "compile", compile_lines), ("Short texts", "short-texts", short_texts_table),
            ("Shards sharing the GPU", "shards", shards_table), ("Fixed cost of a shard", "shard-cost",
            shard_cost_lines), ("Profile", "profile", profile_lines)):
        lines += step_block(steps, title, name, render_step)
    return lines


def step_block(steps: dict[str, dict[str, Any]], title: str, name: str, render_step: Any) -> list[str]:
    """A perf step's titled block: `render_step` of its JSON report, or why there is none."""
    result = result_of(steps, name)
    return [f"**{title}** (`{name}`)", "",
            *(render_step(result) if result else [f"_{not_run(steps.get(name), name)}_", ""])]


def throughput_table(result: dict[str, Any]) -> list[str]:
    """Per batch size x method: seq/s, TFLOP/s, MFU, GPU utilisation, ce's host syncs, ours / HF Trainer."""
    per_size = result.get("per_batch_size") or {}
    rows = []
    for size in sorted(per_size, key=lambda s: (len(str(s)), str(s))):
        entry = per_size[size] or {}
        methods = (entry.get("throughput") or {}).get("methods") or {}
        hf = entry.get("hf_trainer") or {}
        ratio = (hf.get("ratio_vs_hf_trainer") or {}).get("ours")
        versus = sig(ratio) if real(ratio) else f"not run: {hf['error']}" if hf.get("error") else DASH
        for name in METHODS:
            m = methods.get(name) or {}
            syncs = m.get("host_syncs_per_step")
            syncs = sig(syncs) if real(syncs) else m.get("host_syncs_error", DASH)
            util = m.get("gpu_utilisation_pct")
            rows.append([str(size), name, sig(m.get("seq_per_s")), sig(m.get("tflops")), fixed(m.get("mfu"), 3),
                         f"{util:.1f}%" if real(util) else DASH,
                         syncs if name == "ce" else "", versus if name == "ce" else ""])
    return table(["batch", "method", "seq/s", "TFLOP/s", "MFU", "GPU utilisation", "host syncs / step",
                  "ours / HF Trainer"], rows) + ["host syncs and ours / HF Trainer are measured with ce", ""]


def gpu_rule(step: dict[str, Any]) -> str | None:
    """Why a GPU target cannot be judged from the record this step came from (None when it can)."""
    record = step.get("_record") or {}
    return ON_CPU if not record.get("gpu") else ON_DRY_RUN if record.get("dry_run") else None


def targets_table(steps: dict[str, dict[str, Any]]) -> list[str]:
    """Every target with its measured value and whether it is met: `report`'s, short texts' and compile's."""
    targets = result_of(steps, "report").get("targets") or {}
    rows = [[name.replace(">=", "≥"), fixed(t.get("measured"), 3) if "MFU" in name else sig(t.get("measured")),
             verdict(t.get("met"))] for name, t in targets.items()]
    if not targets:
        rows.append(["MFU and ours / HF Trainer (`report`)", DASH, not_run(steps.get("report"), "report")])
    rows.append(short_text_target(steps.get("short-texts")))
    rows.append(compile_target(steps.get("compile")))
    rows += [row for name in ("graphs", "graphs-short") if result_of(steps, name)  # issue 43's, where they ran
             for row in graphs_targets(result_of(steps, name), gpu_rule(steps[name]))]
    return table(["target", "measured", "met"], rows)


def short_text_target(step: dict[str, Any] | None) -> list[str]:
    """The fast path's target: the best of new and new+compile over old, ≥ 3 on each short-text dataset."""
    label = f"short texts: new / old ≥ {SHORT_TEXT_RATIO:g} ({', '.join(SHORT_TEXT_DATASETS)})"
    datasets = ((step or {}).get("result") or {}).get("datasets") or {}
    if not datasets:
        return [label, DASH, not_run(step, "short-texts")]
    best = {}
    for name, entry in sorted(datasets.items()):
        ratios = [r for r in map(((entry or {}).get("ratio_vs_old") or {}).get, ("new", "new+compile")) if real(r)]
        if ratios:
            best[name] = max(ratios)
    missing = [d for d in SHORT_TEXT_DATASETS if d not in best]
    met = gpu_rule(step) or (f"not measured: no {', '.join(missing)} in the result" if missing
                             else all(best[d] >= SHORT_TEXT_RATIO for d in SHORT_TEXT_DATASETS))
    return [label, ", ".join(f"{k} {sig(v)}" for k, v in best.items()) or DASH, verdict(met)]


def compile_target(step: dict[str, Any] | None) -> list[str]:
    """The compile target: each method compiles in under 60 s."""
    label = f"compile time < {COMPILE_LIMIT_S:g} s"
    methods = ((step or {}).get("result") or {}).get("methods") or {}
    if not methods:
        return [label, DASH, not_run(step, "compile")]
    seconds = {n: (e or {}).get("compile_seconds") for n, e in sorted(methods.items())}
    failed = [n for n, s in seconds.items() if not real(s)]
    met = gpu_rule(step) or (f"not measured: {', '.join(failed)} did not compile" if failed
                             else all(s < COMPILE_LIMIT_S for s in seconds.values()))
    return [label, ", ".join(f"{n} {fixed(s, 1)} s" for n, s in seconds.items() if real(s)) or DASH, verdict(met)]


def compile_lines(result: dict[str, Any]) -> list[str]:
    """Per method: eager and compiled step ms, speed-up, compile seconds, compilations, or the error."""
    return [f"backend {result.get('backend', DASH)}, batch {result.get('batch_size', DASH)}, max length "
            f"{result.get('max_length', DASH)}", "",
            *table(["method", "eager step (ms)", "compiled step (ms)", "speed-up", "compile (s)", "compilations",
                    "note"], [compile_row(n, e or {}) for n, e in sorted((result.get("methods") or {}).items())])]


def compile_row(name: str, entry: dict[str, Any]) -> list[str]:
    """One method of `compile`: eager and compiled step ms, speed-up, compile seconds, compilations, error."""
    ms = {k: 1000 * entry[k] for k in ("eager_step_seconds", "compiled_step_seconds") if real(entry.get(k))}
    speedup = entry.get("speedup")
    return [name, sig(ms.get("eager_step_seconds")), sig(ms.get("compiled_step_seconds")),
            f"{sig(speedup)}×" if real(speedup) else DASH,
            fixed(entry.get("compile_seconds"), 1), str(entry.get("compilations", DASH)), entry.get("error", "")]


def short_texts_table(result: dict[str, Any]) -> list[str]:
    """Per dataset: mean tokens, old / new / new+compile seq/s and their ratios to old."""
    rows = []
    for name, entry in sorted((result.get("datasets") or {}).items()):
        speed, ratio = (entry or {}).get("seq_per_s") or {}, (entry or {}).get("ratio_vs_old") or {}
        rows.append([name, sig((entry or {}).get("mean_tokens")), sig(speed.get("old")), sig(speed.get("new")),
                     sig(speed.get("new+compile")), sig(ratio.get("new")), sig(ratio.get("new+compile"))])
    return table(["dataset", "mean tokens", "old seq/s", "new seq/s", "new+compile seq/s", "new / old",
                  "new+compile / old"], rows)


def shards_table(result: dict[str, Any]) -> list[str]:
    """Per K processes sharing the device: aggregate seq/s and the ratio to K = 1."""
    concurrency, ratios = result.get("concurrency") or {}, result.get("ratio_vs_1") or {}
    rows = [[str(k), sig((concurrency[k] or {}).get("aggregate_seq_per_s")), sig(ratios.get(k))]
            for k in sorted(concurrency, key=lambda k: (len(str(k)), str(k)))]
    return [f"dataset {result.get('dataset', DASH)}, batch {result.get('batch_size', DASH)}", "",
            *table(["K", "aggregate seq/s", "ratio vs K = 1"], rows)]


def shard_cost_lines(result: dict[str, Any]) -> list[str]:
    """Wall time, fixed share, per-shard fixed cost, its parts (phases marked), suggested --shard-overhead-s."""
    phases, per_shard = result.get("phases") or {}, result.get("fixed_seconds_per_shard")
    rows = [[k.removesuffix("_seconds").replace("_", " ") + (" (phase)" if k in phases else ""), fixed(v, 2)]
            for k, v in (result.get("parts") or {}).items()]
    epochs = ", ".join(fixed(s, 1) for s in result.get("epoch_seconds") or []) or DASH
    per_shard = "" if per_shard is None else (f"; per shard {fixed(per_shard, 2)} s after the first "
                                              f"({fixed(result.get('first_shard_fixed_seconds'), 2)} s)")
    return [f"wall {fixed(result.get('wall_seconds'), 1)} s, of which fixed {fixed(result.get('fixed_seconds'), 1)} s "
            f"({pct(result.get('fixed_share_of_wall'))}){per_shard}; epochs {epochs} s; suggested "
            f"`--shard-overhead-s {result.get('suggested_shard_overhead_s', DASH)}`", "",
            *table(["part", "seconds"], rows)]


def profile_lines(result: dict[str, Any]) -> list[str]:
    """Step time, GPU busy share, kernel launches and host ops per step, and the top operators."""
    busy = result.get("gpu_busy_share")
    busy_text = pct(busy) if real(busy) else f"{DASH} ({result.get('gpu_busy_share_note', 'not measured')})"
    rows = [[op.get("name", DASH), str(op.get("calls", DASH)), sig(op.get("self_ms_per_step")), pct(op.get("share"))]
            for op in (result.get("top_ops") or [])[:TOP_OPS]]
    return [f"{result.get('method', DASH)}, batch {result.get('batch_size', DASH)}: {sig(result.get('step_ms'))} ms "
            f"per step under the profiler; GPU busy {busy_text}; kernel launches per step "
            f"{sig(result.get('kernel_launches_per_step'))}; host ops per step {sig(result.get('host_ops_per_step'))}",
            "",
            *table(["operator", "calls", "self ms / step", "share of self time"], rows)]


def paper_section(record: dict[str, Any]) -> list[str]:
    """Training status, the runs in the archive, the per-method table from the rows CSV, the paper-ii table."""
    steps = {s["name"]: s for s in record["steps"]}
    train = steps.get("train")
    took = f" in {fixed(train.get('seconds'), 1)} s" if train and real(train.get("seconds")) else ""
    archive = ((train or {}).get("_record") or record).get("archive") or {}
    lines = [f"Training (`train`): {train.get('status') if train else 'did not run'}{took}; runs: "
             f"{archive.get('finished_runs', DASH)} finished, {archive.get('failed_runs', DASH)} failed "
             f"(archive {archive.get('archive') or DASH})", ""]
    source = ((steps.get("export") or {}).get("_record") or record)["_path"]
    csv = source.with_name(f"{source.stem}-rows.csv")
    lines += method_table(csv) if csv.is_file() else [f"_no rows CSV beside the record ({csv.name} is absent)_", ""]
    table_step = steps.get("table")
    tail = str((table_step or {}).get("output_tail") or "").rstrip()
    fence = "````" if "```" in tail else "```"
    return lines + (["<details><summary>paper-ii table (the <code>table</code> step)</summary>", "",
                     f"{fence}text", tail, fence, "", "</details>", ""] if tail
                    else [f"_paper-ii table: {not_run(table_step, 'table')}, no output_", ""])


def mean_sd(values: pd.Series) -> str:
    """Mean ± sd (ddof 1) of fractions, in percent with 1 decimal; the mean alone for one value."""
    values = values.dropna()
    sd = f" ± {100 * values.std(ddof=1):.1f}" if len(values) > 1 else ""
    return f"{100 * values.mean():.1f}{sd}" if len(values) else DASH


def method_table(path: Path) -> list[str]:
    """Per method over the seeds in the rows CSV at `path`: test accuracy and macro-F1, TextFooler and contrast
    figures where present; collapsed runs left out of the means and named."""
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    if lacking := sorted({"run_key", "method", "evaluator", "split", "metric", "value"} - set(frame.columns)):
        return [f"_{path.name} lacks the columns {', '.join(lacking)}_", ""]
    frame["value"] = pd.to_numeric(frame["value"], errors="coerce")
    collapsed = collapsed_keys(frame)
    kept = frame[~frame["run_key"].isin(collapsed)]

    def select(rows: pd.DataFrame, evaluator: str, metric: str) -> pd.DataFrame:
        chosen = rows[(rows["evaluator"] == evaluator) & (rows["metric"] == metric) & rows["value"].notna()]
        return chosen[chosen["split"] == "test"] if evaluator == "clean" else chosen

    columns = [c for c in PAPER_COLUMNS if c[1] == "clean" or not select(kept, c[1], c[2]).empty]
    rows = []
    for method in sorted(set(frame["method"])):
        mine = kept[kept["method"] == method]
        seeds = select(mine, "clean", "accuracy")["run_key"].nunique()
        rows.append([method, str(seeds), *(mean_sd(select(mine, e, m)["value"]) for _, e, m in columns)])
    datasets = ", ".join(sorted(set(frame.get("dataset", [])))) or DASH
    lines = [f"{path.name} ({datasets}): in %, mean ± sd over seeds", "",
             *table(["method", "seeds", *(c[0] for c in columns)], rows)]
    for key in collapsed:
        first = frame[frame["run_key"] == key].iloc[0]
        lines.append(f"- collapsed run left out of the means (it predicts one class): {key} "
                     f"({first['method']}, seed {first.get('seed', DASH)})")
    return lines + ([""] if collapsed else [])


def tests_section(record: dict[str, Any]) -> list[str]:
    """Passed, failed, errors, skipped and test seconds of the pytest step, and the failing tests."""
    step = next((s for s in record["steps"] if s.get("name") == "pytest"), None)
    if not step or "tests" not in step:
        return [f"_no JUnit counts: {not_run(step, 'pytest')}_", ""]
    lines = table(["tests", "passed", "failed", "errors", "skipped", "test seconds"],
                  [[str(step.get(k, DASH)) for k in ("tests", "passed", "failures", "errors", "skipped")]
                   + [fixed(step.get("test_seconds"), 1)]])
    failing = sorted(step.get("failing") or [])
    return lines + (["Failing:", "", *(f"- `{name}`" for name in failing), ""] if failing else [])


def footer(record: dict[str, Any]) -> list[str]:
    """The commands behind the part's figures, and every step that did not run ok, with why."""
    several = len(record["_records"]) > 1
    lines = ["Commands:", "", *(f"- `{s.get('command', DASH)}`" + (f" (run started {s['_record'].get('started')})"
                                                                   if several else "") for s in record["steps"])]
    bad = [s for s in record["steps"] if s.get("status") != "ok"]
    known = [s.name for s in PARTS[record["part"]].steps] if record["part"] in PARTS else []
    absent = [n for n in known if n not in {s.get("name") for s in record["steps"]}]
    if bad or absent:
        lines += ["", "Steps not ok (their stderr is in the .log beside each record):", ""]
        for step in bad:
            code = f" (exit code {step['exit_code']})" if step.get("exit_code") is not None else ""
            reason = f": {step['reason']}" if step.get("reason") else ""
            lines.append(f"- `{step.get('name')}`: {step.get('status')}{code}{reason}")
        lines += [f"- `{name}`: not in any record (not run)" for name in absent]
    return lines
