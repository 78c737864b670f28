"""`clbench results --archive OUT.tar.xz` (bench.results.archive): finished runs packed without models,
checkpoints or leases, their gzip files at level 0 and their manifests to match, so that the unpacked folder
verifies clean and reads as before; a run with a damaged file is named and left out; same runs, same bytes."""

from __future__ import annotations

import gzip
import hashlib
import tarfile

import pytest

from bench.errors import BenchError
from bench.reporting.resultsview import load_results
from bench.results import manifest
from bench.results.archive import pack
from bench.results.verify import verify
from test_report import right, write_run


@pytest.fixture
def results(tmp_path):
    """Two runs on mr and one on trec; the first mr run also has a model (in its manifest), a checkpoint and a
    lease."""
    folder = tmp_path / "results"
    runs = [write_run(folder, "ce", "mr", 1, right(15)), write_run(folder, "supcon", "mr", 1, right(17)),
            write_run(folder, "ce", "trec", 1, right(12))]
    for run in runs:  # manifests, as clbench run writes them
        for path in sorted(run.glob("*.*")):
            manifest.record(run, path, path.stat().st_size, hashlib.sha256(path.read_bytes()).hexdigest())
    first = runs[0]
    model = first / "model.safetensors"
    model.write_bytes(b"weights" * 100)
    manifest.record(first, model, model.stat().st_size, hashlib.sha256(model.read_bytes()).hexdigest())
    (first / "checkpoint.pt").write_bytes(b"state")
    (first / "lease.json").write_text("{}")
    return folder


def unpack(archive, into):
    into.mkdir()
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into


def test_an_archive_leaves_weights_out_and_verifies_clean_unpacked(results, tmp_path, cli):
    out = tmp_path / "shared" / "runs.tar.xz"
    out.parent.mkdir()
    code, _, err = cli("results", "--results-dir", results, "--archive", out)
    assert code == 0 and "wrote 3 run(s)" in err
    with tarfile.open(out) as tar:
        names = tar.getnames()
        assert {m.mtime for m in tar.getmembers()} == {0}
    assert not [n for n in names if n.endswith(("model.safetensors", "checkpoint.pt", "lease.json"))]
    assert "results.parquet" in names and not [n for n in names if n.startswith(".")]
    folder = unpack(out, tmp_path / "unpacked")
    report = verify(folder)
    assert report.runs == 3 and not report.problems and not report.unverified
    first = folder / "ce_mr_minilm_s1_c0"
    assert manifest.load(first)["dropped"]["model.safetensors"].startswith("not in the archive")
    packed = (first / "predictions.jsonl.gz").read_bytes()
    original = (results / "ce_mr_minilm_s1_c0" / "predictions.jsonl.gz").read_bytes()
    assert gzip.decompress(packed) == gzip.decompress(original)
    assert len(packed) > len(gzip.decompress(packed))  # level 0: stored, so that xz sees the text
    before, after = load_results(results), load_results(folder)
    assert sorted(before["value"].astype(float)) == sorted(after["value"].astype(float))
    assert (results / "ce_mr_minilm_s1_c0" / "model.safetensors").exists()  # the results folder is untouched


def test_the_same_runs_give_the_same_bytes_and_filters_choose_runs(results, tmp_path, cli):
    first, second = tmp_path / "a.tar.xz", tmp_path / "b.tar.xz"
    for out in (first, second):
        assert cli("results", "--results-dir", results, "--archive", out, "--filter", "dataset=mr")[0] == 0
    assert first.read_bytes() == second.read_bytes()
    with tarfile.open(first) as tar:
        runs = {name.split("/")[0] for name in tar.getnames() if name.endswith("/rows.json")}
    assert runs == {"ce_mr_minilm_s1_c0", "supcon_mr_minilm_s1_c0"}


def test_a_run_with_a_damaged_file_is_named_and_left_out(results, tmp_path, caplog, cli):
    damaged = results / "supcon_mr_minilm_s1_c0" / "predictions.jsonl.gz"
    damaged.write_bytes(damaged.read_bytes()[:-5] + b"xxxxx")
    out = tmp_path / "runs.tar.xz"
    code, _, err = cli("results", "--results-dir", results, "--archive", out)
    assert code == 0 and "wrote 2 run(s)" in err  # the results loader names it and leaves it out
    assert "supcon_mr_minilm_s1_c0/predictions.jsonl.gz is damaged" in caplog.text
    with tarfile.open(out) as tar:
        assert not [n for n in tar.getnames() if n.startswith("supcon_mr")]
    # a damaged file no table reads (the loader cannot see it) is found by the archive itself
    skipped = pack(sorted(p for p in results.iterdir() if p.name.startswith("ce_")), tmp_path / "ce.tar.xz")
    assert skipped == []
    confusion = results / "ce_trec_minilm_s1_c0" / "confusion.json"
    confusion.write_text("{}")
    manifest.record(confusion.parent, confusion, 2, hashlib.sha256(b"{}").hexdigest())
    confusion.write_text("[]")
    skipped = pack(sorted(p for p in results.iterdir() if p.name.startswith("ce_")), tmp_path / "ce.tar.xz")
    assert len(skipped) == 1 and skipped[0].startswith("ce_trec_minilm_s1_c0 left out: ")
    assert "confusion.json" in skipped[0] and skipped[0].endswith("(`clbench verify --repair`, then run it again)")
    with pytest.raises(BenchError, match="no run to archive: every one has a damaged file"):
        pack([results / "ce_trec_minilm_s1_c0"], tmp_path / "none.tar.xz")
    assert not (tmp_path / "none.tar.xz").exists()


def test_a_wrong_archive_name_or_option_is_one_clear_error(results, tmp_path, cli):
    for extra in ([tmp_path / "runs.zip"], [tmp_path / "runs.tar.xz", "--export", "csv"]):
        code, out, err = cli("results", "--results-dir", results, "--archive", *extra)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
        assert "give a file name ending in .tar.xz" in err
    assert not list(tmp_path.glob("runs*"))
