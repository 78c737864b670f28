"""The GPU campaign end to end on this CPU, as CI runs it: a toy pack (fixture data, the tiny WordNet, toy word
vectors; no downloads, no MiniLM), every part's dry run through scripts/gpu-campaign.sh (one of them on the toy
pack, as the device runs on the real one), and the report of what they returned. About three minutes.

Then what each part's device call would carry (benchmarks.campaign.sizes) against the device's 64 MiB: this working
tree plus the folders' sizes recorded from the last full pack; and every paper part packed from fixture data sets
(the real data's folders are checked by each full pack, which notes any larger than recorded)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

from bench.attack.wordvectors import read_vectors_file
from bench.data.cards import CARDS_DIR, parse_card
from benchmarks.campaign import layout, sizes
from benchmarks.campaign.parts import PAPER_DATASETS, PARTS

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "gpu-campaign.sh"
TREC_LABELS = ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")
QUESTIONS = ("what is the name of the river", "who wrote the famous book", "where is the old city",
             "how many people live there", "what does the short word mean", "why is the sky blue")


def campaign(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """scripts/gpu-campaign.sh with this interpreter."""
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=REPO, env=dict(os.environ, PYTHON=sys.executable),
                          capture_output=True, text=True, timeout=timeout)


def write_toy(folder: Path, name: str, labels: tuple[str, ...]) -> list[str]:
    """A data set shaped as the card `name` (its labels) in folder/name; its texts."""
    (folder / name).mkdir(parents=True)
    texts = []
    for split, count in (("train", 36), ("test", 12)):
        rows = [{"text": f"{QUESTIONS[i % 6]} number {i}", "label": labels[i % len(labels)]} for i in range(count)]
        texts += [row["text"] for row in rows]
        (folder / name / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return texts


def write_toy_trec(folder: Path) -> list[str]:
    """A trec-shaped data set (the card's six labels) in folder/trec; its texts."""
    return write_toy(folder, "trec", TREC_LABELS)


def write_vectors(path: Path, texts: list[str]) -> None:
    """Toy word vectors (8 dimensions) for every word of `texts`."""
    words = sorted({w for text in texts for w in text.split()})
    rows = np.random.default_rng(1).standard_normal((len(words), 8))
    path.write_text("".join(f"{w} {' '.join(f'{x:.5f}' for x in r)}\n" for w, r in zip(words, rows)))


@pytest.fixture(scope="module")
def toy_pack(tmp_path_factory) -> Path:
    """A pack for paper:trec made by `pack` from toy inputs."""
    root = tmp_path_factory.mktemp("campaign")
    write_vectors(root / "vectors.txt", write_toy_trec(root / "data"))
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
    assert manifest["folders"]["paper-trec"] == [layout.DATA_ARCHIVE, layout.VECTORS_ARCHIVE]
    with tarfile.open(toy_pack / "paper-trec" / layout.DATA_ARCHIVE) as tar:
        assert "data/trec/test.jsonl" in tar.getnames()
    with tarfile.open(toy_pack / "paper-trec" / layout.VECTORS_ARCHIVE) as tar:
        tar.extractall(toy_pack.parent / "unpacked", filter="data")
    words, matrix = read_vectors_file(toy_pack.parent / "unpacked" / layout.VECTORS)
    assert 0 < len(words) == len(matrix) and matrix.dtype == np.float32
    assert all(size < layout.FOLDER_LIMIT_MIB for size in manifest["mib"].values())
    assert (toy_pack / "wordnet" / "wordnet.tar.xz").is_file()


@pytest.mark.slow
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
    graphs = {step["name"]: step["result"] for step in perf["steps"] if step["name"].startswith("graphs")}
    for result in graphs.values():  # the graph-ready step on a CPU: the plain step's losses exactly
        assert all(case["loss_agreement"]["max_abs_difference"] == 0.0 for case in result["cases"])
    assert [case["method"] for case in graphs["graphs-short"]["cases"]] == ["ce", "clld-adaptive"]
    shard = graphs["graphs-short"]["shard"]
    assert (shard["off"]["cuda_graphs"], shard["auto"]["cuda_graphs"]) == ("off: --cuda-graphs off", "off: a CPU")
    tests = json.loads((out / "tests.json").read_text())["steps"][0]
    assert tests["tests"] > 0 and tests["failures"] == tests["errors"] == 0
    done = campaign("report", str(out))
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "dry run at toy scale" in text and "not GPU figures" in text
    for name in PARTS:
        assert f"### {name}" in text
    assert "not applicable: a GPU target" in text
    assert "**CUDA graphs** (`graphs`)" in text and "CUDA graphs: tiny-bert clld-adaptive batch 4" in text
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


# ---------------------------------------------------------------------------------------------- what a call carries

def over_the_limit(folders: dict[str, float], tree: float) -> list[str]:
    """The refusal of each part whose call would carry the limit or more with CI's margin (sizes.CI_MARGIN_MIB)."""
    return [line for part in PARTS.values() if (line := sizes.refusal(part, folders, tree + sizes.CI_MARGIN_MIB))]


def test_every_part_fits_a_device_call_with_this_working_tree():
    """This tree (it travels with every call) plus each part's folders as the last full pack made them."""
    tree = sizes.tree_mib(REPO)
    if tree is None:
        pytest.skip("not a git checkout: what travels is unknown")
    over = over_the_limit(sizes.PACKED_MIB, tree)
    assert not over, "\n".join([*over, sizes.size_table(list(PARTS.values()), sizes.PACKED_MIB, tree)])


def test_every_paper_part_packed_from_fixture_data_fits_its_recorded_sizes(tmp_path):
    """Every paper part's folders (its data set, the vectors cut to its attacked texts, WordNet), packed by `pack`
    from fixture data sets with the cards' labels, against PACKED_MIB and the limit. The folders packed from the
    real data are checked by every full pack, which notes one larger than recorded (`sizes.larger_than_recorded`)."""
    texts = [text for name in PAPER_DATASETS
             for text in write_toy(tmp_path / "data", name, tuple(parse_card(CARDS_DIR / f"{name}.yaml").labels))]
    write_vectors(tmp_path / "vectors.txt", texts)
    papers = [name for name, part in PARTS.items() if part.dataset]
    done = campaign("pack", str(tmp_path / "pack"), "--data-dir", str(tmp_path / "data"), "--no-download",
                    "--no-minilm", "--word-vectors", str(tmp_path / "vectors.txt"), "--parts", ",".join(papers))
    assert done.returncode == 0, done.stderr
    measured = json.loads((tmp_path / "pack" / layout.BASE / layout.MANIFEST).read_text())["mib"]
    made = [layout.WORDNET, *(layout.paper_folder(d) for d in PAPER_DATASETS)]
    larger = {f: measured[f] for f in made if measured[f] > sizes.PACKED_MIB[f]}
    assert not larger, f"{larger}: update PACKED_MIB in benchmarks/campaign/sizes.py (MiB) with a full pack"
    folders = {**sizes.PACKED_MIB, **{f: measured[f] for f in made}}
    tree = sizes.tree_mib(REPO) or 0
    over = over_the_limit(folders, tree)
    assert not over, "\n".join([*over, sizes.size_table(list(PARTS.values()), folders, tree)])
