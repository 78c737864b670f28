"""`clbench evaluate --selected`: after a knob grid, the evaluators score exactly the runs `clbench report
--select-by validation` reports (the chosen combination of each method, on the evaluation seeds), no other run;
--selection-seeds/--eval-seeds move the choice and narrow the runs; misuse is one line with exit code 2."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest

from bench.cli.main import main
from bench.results import runfiles, store
from conftest import FAST, FIXTURE

SWEEP = ["--methods", "ce,supcon", "--grid", "supcon.tau=0.1,0.3", "--seeds", "1,2", "--yes", "--epochs", "1"]
# planted validation accuracy of supcon by tau and seed: tau=0.1 wins on seed 1, tau=0.3 on seed 2 and on the mean
PLANTED = {0.1: {1: 0.9, 2: 0.2}, 0.3: {1: 0.5, 2: 0.8}}
REPR = ["--evaluators", "repr", "--device", "cpu"]


def clbench(*argv: str) -> tuple[int, str, str]:
    """Run the CLI in-process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def tau(rows: list[dict]) -> float:
    """A supcon run's temperature: its grid knob, or the default 0.3 when the knobs leave it out."""
    return json.loads(rows[0]["knobs"] or "{}").get("supcon.tau", 0.3)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One torch thread while this module trains and scores: tiny models on a busy machine run twice as fast."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, one_thread) -> Path:
    """The grid trained once with no evaluators and its models kept, supcon's validation accuracy planted."""
    folder = tmp_path_factory.mktemp("evaluate-selected") / "results"
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("BENCH_DATA_DIR", raising=False)
        patch.setenv("HF_HUB_OFFLINE", "1")
        code, _, err = clbench("run", "--datasets", FIXTURE, *FAST, *SWEEP, "--results-dir", folder)
    assert code == 0, err
    for rows_path in folder.glob(f"supcon_*/{store.ROWS}"):
        rows = json.loads(rows_path.read_text())
        for row in rows:
            if (row["split"], row["metric"], row["label"]) == ("validation", "accuracy", ""):
                row["value"] = PLANTED[tau(rows)][row["seed"]]
        runfiles.write_json(rows_path.parent, store.ROWS, rows)  # through the manifest: planted, not damaged
    assert not list(folder.glob("*/evals/*.json"))  # nothing was evaluated while training
    return folder


@pytest.fixture
def results(trained, tmp_path) -> Path:
    """A fresh copy of the trained grid for one test (evaluations are written into the run folders)."""
    return Path(shutil.copytree(trained, tmp_path / "grid"))


def runs_of(results: Path, method: str, temperature: float | None = None, seeds=(1, 2)) -> set[str]:
    """The run keys of one method (and, for supcon, one temperature) on some seeds."""
    keys = set()
    for rows_path in results.glob(f"{method}_*/{store.ROWS}"):
        rows = json.loads(rows_path.read_text())
        if rows[0]["seed"] in seeds and (temperature is None or tau(rows) == temperature):
            keys.add(rows_path.parent.name)
    return keys


def evaluated(results: Path) -> set[str]:
    """The run folders holding a stored evaluation."""
    return {path.parent.parent.name for path in results.glob("*/evals/*.json")}


def test_only_the_selected_runs_are_evaluated(results):
    code, out, err = clbench("evaluate", "--selected", "--results-dir", results, *REPR)
    assert code == 0, err
    chosen = runs_of(results, "ce") | runs_of(results, "supcon", 0.3)  # tau=0.3 wins on the mean of all seeds
    assert len(chosen) == 4 and evaluated(results) == chosen
    assert all(p.name.startswith("repr-") for p in results.glob("*/evals/*.json"))
    assert "--selected: 4 of 6 finished run(s)" in err and "optimistic" in err  # chosen and scored on one seed set
    assert "repr" in out and "alignment_class" in out


def test_selection_seeds_move_the_choice_and_eval_seeds_narrow_the_runs(results):
    code, _, err = clbench("evaluate", "--selected", "--selection-seeds", "1", "--results-dir", results, *REPR)
    assert code == 0, err  # chosen on seed 1 (tau=0.1), evaluated on the other seed
    assert evaluated(results) == runs_of(results, "ce", seeds=(2,)) | runs_of(results, "supcon", 0.1, (2,))
    assert "--selected: 2 of 6" in err and "optimistic" not in err
    for path in results.glob("*/evals"):
        shutil.rmtree(path)
    code, _, err = clbench("evaluate", "--selected", "--eval-seeds", "1", "--results-dir", results, *REPR)
    assert code == 0, err  # evaluated on seed 1 only, so chosen on seed 2 (tau=0.3)
    assert evaluated(results) == runs_of(results, "ce", seeds=(1,)) | runs_of(results, "supcon", 0.3, (1,))


def test_outside_models_runs_are_left_out(results):
    """A run of a model trained elsewhere (method external) has no knobs and no saved model: never selected
    (chosen, it would stop the command: `check_external`)."""
    source = results / sorted(runs_of(results, "ce", seeds=(1,)))[0]
    external = results / "external_tiny_outside"
    shutil.copytree(source, external)
    (external / "model.safetensors").unlink()
    for name in (store.ROWS, store.SPEC):
        value = json.loads((external / name).read_text())
        for row in value if isinstance(value, list) else [value]:
            row.update({"method": "external", "seed": 0,
                        **({"run_key": external.name} if name == store.ROWS else {"key": external.name})})
        runfiles.write_json(external, name, value)  # through its manifest: a run of its own, not damaged
    code, _, err = clbench("evaluate", "--selected", "--results-dir", results, *REPR)
    assert code == 0, err
    assert evaluated(results) == runs_of(results, "ce") | runs_of(results, "supcon", 0.3)
    assert "4 of 7 finished run(s)" in err


def test_a_selected_run_without_its_model_stops_before_anything_is_scored(results):
    missing = sorted(runs_of(results, "supcon", 0.3, (2,)))[0]
    (results / missing / "model.safetensors").unlink()
    code, _, err = clbench("evaluate", "--selected", "--results-dir", results, *REPR)
    assert code == 2 and "without a saved model" in err and missing in err
    assert not evaluated(results)


@pytest.mark.parametrize("argv, fragment", [
    (["--selected", "ce_*"], "drop the RUN arguments"),
    (["--selected", "--model", "somewhere", "--datasets", "tiny"], "drop --model"),
    (["ce_*", "--selection-seeds", "1"], "add --selected"),
    (["ce_*", "--eval-seeds", "2"], "add --selected"),
    (["--selected", "--selection-seeds", "1,2", "--eval-seeds", "2,3"], "share seed(s) 2"),
    (["--selected", "--selection-seeds", "7"], "7"),
])
def test_misuse_is_one_line_and_exit_2(results, argv, fragment):
    code, _, err = clbench("evaluate", *argv, "--results-dir", results, *REPR)
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2 and len(lines) == 1 and fragment in lines[0], err
    assert not evaluated(results)


def test_a_results_folder_without_finished_runs_is_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    code, _, err = clbench("evaluate", "--selected", "--results-dir", tmp_path / "empty", *REPR)
    assert code == 2 and "no finished runs" in err and "clbench run" in err
