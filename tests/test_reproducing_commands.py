"""The `clbench report` commands beside the published SST-2 tables reproduce them as written: every command of
docs/REPRODUCING.md's few-label section and of the headers of configs/fewshot-sst2-minilm.yaml and
configs/noise-sst2-minilm.yaml that chooses knobs (`--select-by`) parses and runs (exit 0) on a small synthetic
results folder shaped like those runs (nothing is trained), each header command is one of the doc's, and the doc
and the headers agree on `--selection-seeds`."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
from pathlib import Path

import pytest

from bench.cli.main import main
from bench.results import store

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "REPRODUCING.md"
SECTION = "## Few labels and noisy labels (SST-2)"
CONFIGS = [ROOT / "configs" / "fewshot-sst2-minilm.yaml", ROOT / "configs" / "noise-sst2-minilm.yaml"]
N_ITEMS = 20
LABELS = ("negative", "positive")
# the data regimes of the two configs: (train_size, val_size, label_noise, the setting every run changed)
REGIMES = [(20, None, 0.0, {"batch_size": 16}), (100, None, 0.0, {"batch_size": 16}),
           (1000, 500, 0.0, {"epochs": 2}), (1000, 500, 0.2, {"epochs": 2}), (1000, 500, 0.4, {"epochs": 2})]
COMBOS = {"ce": [{}], "supcon": [{}, {"supcon.tau": 0.1}],
          "lcl": [{"lcl.ce_weight": 0.9}, {"lcl.ce_weight": 0.9, "lcl.tau": 0.1}],
          "clld-adaptive": [{"clld-adaptive.ce_weight": 0.9},
                            {"clld-adaptive.ce_weight": 0.9, "clld-adaptive.tau": 2.0}]}
SEEDS = (1, 2, 3)


def clbench(*argv: object) -> tuple[int, str, str]:
    """Run the CLI in-process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def report_commands(text: str) -> list[str]:
    """The `clbench report` commands of a text, in order, with their whitespace collapsed: lines of code blocks
    (comments after `#` dropped) and inline code spans, which may wrap onto the next line."""
    found = [line.split(" #")[0] for line in text.splitlines() if line.startswith("clbench report ")]
    found += re.findall(r"`(clbench report [^`]*)`", text)
    return list(dict.fromkeys(" ".join(command.split()) for command in found))


def section_text() -> str:
    """docs/REPRODUCING.md's few-label section (up to the next second-level heading)."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    return text[start:end if end >= 0 else len(text)]


def header_text(config: Path) -> str:
    """A config's header: its leading comment lines, without the `# `."""
    lines = []
    for line in config.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        lines.append(line[1:].strip())
    return "\n".join(lines)


def selecting(commands: list[str]) -> list[str]:
    """The commands that choose knobs on validation (the ones whose seeds matter)."""
    return [c for c in commands if "--select-by" in shlex.split(c)]


def option(command: str, name: str) -> str | None:
    """The value of `name` in a command (None when absent)."""
    words = shlex.split(command)
    return words[words.index(name) + 1] if name in words else None


DOC_COMMANDS = selecting(report_commands(section_text()))
HEADER_COMMANDS = {config.name: selecting(report_commands(header_text(config))) for config in CONFIGS}


def write_run(folder: Path, method: str, seed: int, regime: tuple, knobs: dict, combo: str) -> None:
    """A finished run folder: clean validation and test accuracy rows and its test predictions."""
    train_size, val_size, noise, common = regime
    key = f"{method}_sst2_minilm_s{seed}_{combo}"
    shift = (seed + len(method) + len(knobs) + int(noise * 10) + train_size % 7) % 5
    correct = [(i + shift) % N_ITEMS < 12 + shift for i in range(N_ITEMS)]
    gold = [LABELS[i % 2] for i in range(N_ITEMS)]
    predicted = [g if ok else LABELS[1 - LABELS.index(g)] for g, ok in zip(gold, correct)]
    store.write_jsonl_gz(folder / key / store.PREDICTIONS, [
        {"id": f"test-{i}", "gold": g, "predicted": p, "probabilities": [0.5, 0.5]}
        for i, (g, p) in enumerate(zip(gold, predicted))])
    changed = {**common, **knobs}
    base = {"run_key": key, "method": method, "dataset": "sst2", "encoder": "minilm", "seed": seed,
            "evaluator": "clean", "label": "", "n": N_ITEMS, "config_hash": f"{combo}{seed}", "combo": combo,
            "knobs": json.dumps(changed, sort_keys=True, separators=(",", ":")), "train_size": train_size,
            "label_noise": noise, "data_fingerprint": "fp-sst2", "clbench_version": "0.1.0", "git_commit": "abc123",
            "wall_seconds": 10.0, **({"val_size": val_size} if val_size else {})}
    store.write_json(folder / key / store.ROWS, [
        {**base, "split": "validation", "metric": "accuracy", "value": 0.5 + 0.01 * ((seed * 3 + len(knobs)) % 4)},
        {**base, "split": "test", "metric": "accuracy", "value": sum(correct) / N_ITEMS}])


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """Runs shaped like the issue-30 SST-2 runs: the five data regimes, ce's one combination and two of each
    contrastive method's, seeds 1-3."""
    folder = tmp_path_factory.mktemp("reproducing") / "results"
    for r, regime in enumerate(REGIMES):
        for method, combos in COMBOS.items():
            for c, knobs in enumerate(combos):
                for seed in SEEDS:
                    write_run(folder, method, seed, regime, knobs, f"r{r}c{c}")
    store.gather(folder)
    return folder


def test_the_doc_and_both_config_headers_give_commands():
    assert len(DOC_COMMANDS) >= 5, DOC_COMMANDS  # 20, 100, and 1,000 examples at 0, 20 and 40% noise
    for name, commands in HEADER_COMMANDS.items():
        assert commands, f"{name}: no `clbench report --select-by ...` command in its header"


@pytest.mark.parametrize("config", [c.name for c in CONFIGS])
def test_each_header_command_is_the_docs_and_they_agree_on_the_selection_seeds(config):
    seeds = {option(c, "--selection-seeds") for c in DOC_COMMANDS}
    assert len(seeds) == 1 and None not in seeds, f"REPRODUCING.md's commands choose on {seeds}"
    for command in HEADER_COMMANDS[config]:
        assert option(command, "--selection-seeds") in seeds, f"{config}: {command}"
        assert command in DOC_COMMANDS, f"{config}'s header command is not in REPRODUCING.md: {command}"


@pytest.mark.parametrize("command", sorted({*DOC_COMMANDS, *(c for cs in HEADER_COMMANDS.values() for c in cs)}))
def test_the_command_runs(command, results, tmp_path):
    words = shlex.split(command)
    assert words[:2] == ["clbench", "report"]
    code, out, err = clbench(*words[1:], "--results-dir", results, "--reports-dir", tmp_path)
    assert code == 0, f"{command}: {err}"
    assert "Knobs chosen by validation" in out and "| 1×1 |" in out and "| 2×1 |" in out, out
