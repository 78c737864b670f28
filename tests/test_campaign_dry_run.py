"""The GPU campaign end to end on this CPU, as CI runs it: a toy pack (fixture data, the tiny WordNet, toy word
vectors; no downloads, no MiniLM), every part's dry run through scripts/gpu-campaign.sh (one of them on the toy
pack, as the device runs on the real one), and the report of what they returned. About three minutes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bench.attack.wordvectors import read_vectors_file
from bench.perf.campaign import layout
from bench.perf.campaign.parts import PARTS

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "gpu-campaign.sh"
TREC_LABELS = ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")
QUESTIONS = ("what is the name of the river", "who wrote the famous book", "where is the old city",
             "how many people live there", "what does the short word mean", "why is the sky blue")


def campaign(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """scripts/gpu-campaign.sh with this interpreter."""
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=REPO, env=dict(os.environ, PYTHON=sys.executable),
                          capture_output=True, text=True, timeout=timeout)


def write_toy_trec(folder: Path) -> list[str]:
    """A trec-shaped data set (the card's six labels) in folder/trec; its texts."""
    (folder / "trec").mkdir(parents=True)
    texts = []
    for split, count in (("train", 36), ("test", 12)):
        rows = [{"text": f"{QUESTIONS[i % 6]} number {i}", "label": TREC_LABELS[i % 6]} for i in range(count)]
        texts += [row["text"] for row in rows]
        (folder / "trec" / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return texts


@pytest.fixture(scope="module")
def toy_pack(tmp_path_factory) -> Path:
    """A pack for paper:trec made by `pack` from toy inputs."""
    root = tmp_path_factory.mktemp("campaign")
    texts = write_toy_trec(root / "data")
    words = sorted({w for text in texts for w in text.split()})
    rows = np.random.default_rng(1).standard_normal((len(words), 8))
    (root / "vectors.txt").write_text("".join(f"{w} {' '.join(f'{x:.5f}' for x in r)}\n" for w, r in zip(words, rows)))
    pack = root / "pack"
    done = campaign("pack", str(pack), "--data-dir", str(root / "data"), "--parts", "paper:trec", "--no-download",
                    "--no-minilm", "--word-vectors", str(root / "vectors.txt"))
    assert done.returncode == 0, done.stderr
    assert "paper:trec (" in done.stdout and "carry [" in done.stdout, done.stdout
    return pack


def test_pack_writes_the_folders_of_its_parts_with_a_manifest_of_this_code(toy_pack):
    manifest = json.loads((toy_pack / layout.BASE / layout.MANIFEST).read_text())
    assert manifest["source_sha256"] == layout.source_hash(REPO) and manifest["parts"] == ["paper:trec"]
    assert sorted(manifest["folders"]) == sorted(PARTS["paper:trec"].carry)
    assert any(name.startswith("clbench-") and name.endswith(".whl") for name in manifest["folders"]["base"])
    assert "trec/test.jsonl" in "\n".join(manifest["folders"]["paper-trec"])
    words, matrix = read_vectors_file(toy_pack / "paper-trec" / layout.VECTORS)
    assert 0 < len(words) == len(matrix) and matrix.dtype == np.float32
    assert all(size < layout.FOLDER_LIMIT_MIB for size in manifest["mib"].values())
    assert (toy_pack / "wordnet" / "wordnet.tar.xz").is_file()


def test_every_part_dry_runs_and_the_report_turns_the_records_into_tables(toy_pack, tmp_path):
    out = tmp_path / "out"
    for name, part in PARTS.items():
        pack = ["--pack", str(toy_pack)] if name == "paper:trec" else []
        done = campaign("run", name, "--dry-run", "--out", str(out), *pack)
        record = json.loads((out / f"{name.replace(':', '-')}.json").read_text())
        statuses = {step["name"]: step["status"] for step in record["steps"]}
        assert done.returncode == 0, (name, statuses, (out / f"{name.replace(':', '-')}.log").read_text()[-3000:])
        assert statuses == {step.name: "ok" for step in part.steps}
        assert record["dry_run"] is True and record["finished"] and record["device_name"]
        if name == "paper:trec":  # the pack's WordNet, vectors and manifest were used
            assert record["pack"]["parts"] == ["paper:trec"]
            train = next(step for step in record["steps"] if step["name"] == "train")
            assert "ce" in train["output_tail"]
        if part.dataset:
            assert record["archive"]["finished_runs"] == 1
            assert (out / f"paper-{part.dataset}-rows.csv").is_file()
    perf = json.loads((out / "perf.json").read_text())
    report = next(step for step in perf["steps"] if step["name"] == "report")["result"]
    assert set(report["per_batch_size"]) == {"4", "8"}
    tests = json.loads((out / "tests.json").read_text())["steps"][0]
    assert tests["tests"] > 0 and tests["failures"] == tests["errors"] == 0
    done = campaign("report", str(out))
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "dry run at toy scale" in text and "not GPU figures" in text
    for name in PARTS:
        assert f"### {name}" in text
    assert "not applicable: a GPU target" in text
    assert len(list(out.iterdir())) <= 4 * len(PARTS)  # a device call returns at most 8 files


def test_a_pack_made_from_other_code_is_refused_in_one_line(toy_pack, tmp_path):
    stale = tmp_path / "stale"
    for folder in PARTS["paper:trec"].carry:
        (stale / folder).mkdir(parents=True)
    manifest = json.loads((toy_pack / layout.BASE / layout.MANIFEST).read_text())
    (stale / layout.BASE / layout.MANIFEST).write_text(json.dumps({**manifest, "source_sha256": "0" * 64}))
    done = campaign("run", "paper:trec", "--dry-run", "--pack", str(stale), "--out", str(tmp_path / "out"))
    assert done.returncode == 2 and "built from other code" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out" / "paper-trec.json").exists()
