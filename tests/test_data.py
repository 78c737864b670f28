import gzip
import json

import numpy as np
import pandas as pd
import pytest

import bench.data.loading as data_module
from bench.data.loading import Split, carve_validation, load_dataset
from bench.errors import BenchError
from conftest import FIXTURE, read_fixture, write_jsonl


def rows(n_per_class=10, classes=("a", "b", "c")):
    return [{"text": f"text {c} number {i}", "label": c} for c in classes for i in range(n_per_class)]


def test_fixture_folder_loads(tiny):
    data = load_dataset(str(tiny))
    assert data.name == "tiny"
    assert data.label_names == ["food", "sport", "weather"]
    assert len(data.test) == 30
    assert len(data.train) + len(data.validation) == 45
    assert data.source.startswith("folder:")
    assert "stratified 10% of train" in data.validation_source


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz", ".csv", ".tsv"])
def test_every_file_format(tmp_path, suffix):
    folder = tmp_path / "set"
    folder.mkdir()
    for split in ("train", "validation", "test"):
        frame = pd.DataFrame(rows(4))
        path = folder / f"{split}{suffix}"
        if suffix == ".csv":
            frame.to_csv(path, index=False)
        elif suffix == ".tsv":
            frame.to_csv(path, index=False, sep="\t")
        else:
            text = "".join(json.dumps(r) + "\n" for r in frame.to_dict("records"))
            opener = gzip.open if suffix.endswith(".gz") else open
            with opener(path, "wt") as f:
                f.write(text)
    data = load_dataset(str(folder))
    assert (len(data.train), len(data.validation), len(data.test)) == (12, 12, 12)
    assert data.validation_source == "validation split of the source"
    assert data.train.texts[0] == "text a number 0"


def test_csv_with_commas_and_quotes(tmp_path):
    folder = tmp_path / "q"
    folder.mkdir()
    frame = pd.DataFrame([{"text": 'he said "hi, there"', "label": "x"}, {"text": "plain", "label": "y"}] * 5)
    frame.to_csv(folder / "train.csv", index=False)
    frame.to_csv(folder / "test.csv", index=False)
    data = load_dataset(str(folder))
    assert 'he said "hi, there"' in data.train.texts + data.validation.texts


def test_card_dataset_from_data_dir_warns_on_size_mismatch(tmp_path, caplog):
    write_jsonl(tmp_path / "data" / "mr" / "train.jsonl",
                [{"text": f"good film {i}", "label": "positive"} for i in range(10)]
                + [{"text": f"bad film {i}", "label": "negative"} for i in range(10)])
    write_jsonl(tmp_path / "data" / "mr" / "test.jsonl",
                [{"text": "fine", "label": "positive"}, {"text": "awful", "label": "negative"}])
    data = load_dataset("mr", data_dir=str(tmp_path / "data"))
    assert data.label_names == ["negative", "positive"]
    assert data.source == f"local:{tmp_path / 'data' / 'mr'}"
    assert any("published size is 7108" in w for w in data.warnings)


def test_bench_data_dir_environment_variable(tmp_path, monkeypatch):
    for split in ("train", "test"):
        write_jsonl(tmp_path / "d" / "trec" / f"{split}.jsonl",
                    [{"text": f"what is {i} ?", "label": "NUM" if i % 2 else "DESC"} for i in range(20)])
    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path / "d"))
    assert load_dataset("trec").source.startswith("local:")


def test_generated_demo_is_seeded():
    a, b, c = load_dataset("demo", data_seed=0), load_dataset("demo", data_seed=0), load_dataset("demo", data_seed=1)
    assert a.fingerprint == b.fingerprint != c.fingerprint
    assert a.num_labels == 7 and len(a.test) == 250


def test_carve_is_stratified_stable_and_seeded():
    labels = np.repeat(np.arange(3), [100, 50, 20])
    train = Split([str(i) for i in range(170)], [f"t{i}" for i in range(170)], labels)
    kept, held = carve_validation(train, 0.1, seed=0)
    assert sorted(kept.ids + held.ids, key=int) == train.ids
    assert np.bincount(held.labels).tolist() == [10, 5, 2]
    again = carve_validation(train, 0.1, seed=0)[1]
    other = carve_validation(train, 0.1, seed=1)[1]
    assert held.ids == again.ids
    assert held.ids != other.ids


def test_carve_keeps_single_member_classes_in_train():
    labels = np.array([0] * 20 + [1] * 20 + [2])
    train = Split([str(i) for i in range(41)], ["x"] * 41, labels)
    kept, held = carve_validation(train, 0.1, seed=0)
    assert "40" in kept.ids and 2 not in held.labels


def test_fingerprint_follows_content(tiny):
    before = load_dataset(str(tiny)).fingerprint
    lines = (tiny / "test.jsonl").read_text().splitlines()
    lines[0] = lines[0].replace("the", "a", 1)
    (tiny / "test.jsonl").write_text("\n".join(lines) + "\n")
    assert load_dataset(str(tiny)).fingerprint != before


# ----------------------------------------------------------------------------------------------- bad input

def folder_with(tmp_path, train, test):
    write_jsonl(tmp_path / "bad" / "train.jsonl", train)
    write_jsonl(tmp_path / "bad" / "test.jsonl", test)
    return str(tmp_path / "bad")


@pytest.mark.parametrize("train,test,message", [
    ([], rows(2), "empty train split"),
    (rows(4), [], "empty test split"),
    (rows(4, ("a", "b")), rows(2, ("a", "z")), "\\['z'\\] never occur in train"),
    (rows(4) + [{"label": "a"}], rows(2), "row 13 of .* has no 'text' field"),
    (rows(4) + [{"text": "   ", "label": "a"}], rows(2), "1 row\\(s\\) of .* have empty text \\(first: row 13\\)"),
    (rows(4) + [{"text": "x"}], rows(2), "row 13 of .* has no 'label' value"),
])
def test_bad_rows_give_one_line_errors(tmp_path, train, test, message):
    with pytest.raises(BenchError, match=message) as err:
        load_dataset(folder_with(tmp_path, train, test))
    assert "\n" not in str(err.value)


def test_malformed_json_names_the_line(tmp_path):
    folder = folder_with(tmp_path, rows(3), rows(1))
    with open(f"{folder}/train.jsonl", "a") as f:
        f.write('{"text": "oops", "label": \n')
    with pytest.raises(BenchError, match="malformed JSON on line 10 of"):
        load_dataset(folder)


def test_unreadable_file(tmp_path):
    folder = folder_with(tmp_path, rows(3), rows(1))
    (tmp_path / "bad" / "train.jsonl").unlink()
    (tmp_path / "bad" / "train.jsonl.gz").write_bytes(b"not gzip at all")
    with pytest.raises(BenchError, match="train.jsonl.gz is not gzip-compressed: expected gzip .*rename it to "
                                         "train.jsonl if it is plain text"):
        load_dataset(folder)


def test_missing_split_files(tmp_path):
    write_jsonl(tmp_path / "only" / "train.jsonl", rows(3))
    with pytest.raises(BenchError, match="needs train and test files.*found: train.jsonl"):
        load_dataset(str(tmp_path / "only"))


def test_label_outside_card(tmp_path):
    write_jsonl(tmp_path / "d" / "mr" / "train.jsonl", [{"text": "x", "label": "neutral"}] * 3)
    write_jsonl(tmp_path / "d" / "mr" / "test.jsonl", [{"text": "x", "label": "neutral"}])
    with pytest.raises(BenchError, match="not among the known labels"):
        load_dataset("mr", data_dir=str(tmp_path / "d"))


def test_unknown_dataset_name():
    with pytest.raises(BenchError, match="unknown dataset 'trek'. Did you mean 'trec'\\?.*Known datasets: 20ng"):
        load_dataset("trek")


@pytest.mark.parametrize("name,words", [
    ("MYDATA/sst33", ["dataset folder MYDATA/sst33 does not exist", "did you mean MYDATA/sst2?"]),
    ("./MYDATA/sst33", ["dataset folder ./MYDATA/sst33 does not exist", "did you mean ./MYDATA/sst2?"]),
    ("mydata/sst2", ["dataset folder mydata/sst2 does not exist", "did you mean MYDATA/sst2?"]),
    ("~/MYDATA/sst33", ["dataset folder ~/MYDATA/sst33 does not exist", "did you mean ~/MYDATA/sst2?"]),
    ("OTHER/sst2", ["dataset folder OTHER/sst2 does not exist", "there is no folder OTHER in"]),
    ("./nothing-like-it", ["dataset folder ./nothing-like-it does not exist"]),
])
def test_a_dataset_path_that_does_not_exist_is_named_as_a_missing_folder(tmp_path, monkeypatch, name, words):
    """A --datasets name written as a path (a separator in it, or a leading . or ~) that does not exist: the
    folder does not exist, with the closest existing folder; not `unknown dataset` (which is for card names)."""
    from bench.cli.run_options import check_dataset_name

    (tmp_path / "MYDATA" / "sst2").mkdir(parents=True)
    (tmp_path / "MYDATA" / "trec").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("BENCH_DATA_DIR", raising=False)
    for check in (lambda: data_module.load_raw(name, None, 0), lambda: check_dataset_name(name, None)):
        with pytest.raises(BenchError) as err:
            check()
        message = str(err.value)
        assert "unknown dataset" not in message and "\n" not in message, message
        for word in words:
            assert word in message, (word, message)
        assert "give the path of a folder that holds train and test files" in message
        if "did you mean" not in words[-1]:
            assert "did you mean" not in message


def test_hub_failure_points_to_local_copies(monkeypatch):
    import datasets as hf_datasets

    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'SetFit/20_newsgroups' on the Hub")

    monkeypatch.setattr(hf_datasets, "load_dataset", offline)
    monkeypatch.setattr(data_module, "hub_reachable", lambda: True)
    with pytest.raises(BenchError) as err:
        load_dataset("20ng")
    message = str(err.value)
    assert "could not load '20ng' from the Hugging Face Hub (SetFit/20_newsgroups)" in message
    assert "--data-dir DIR" in message and "BENCH_DATA_DIR" in message


def test_hub_rows_are_mapped_through_label_names(monkeypatch):
    import datasets as hf_datasets

    tables = {
        "train": hf_datasets.Dataset.from_dict({"text": [f"q{i}" for i in range(40)],  # 10% carves 4: a class each
                                                "coarse_label": [0, 1, 2, 5] * 10}),
        "test": hf_datasets.Dataset.from_dict({"text": ["q5", "q6"], "coarse_label": [1, 5]}),
    }
    monkeypatch.setattr(hf_datasets, "load_dataset", lambda id_, config, split: tables[split])
    monkeypatch.setattr(data_module, "hub_reachable", lambda: True)
    data = load_dataset("trec")
    assert data.source == "hub:CogComp/trec"
    names = [data.label_names[i] for i in data.test.labels]
    assert names == ["ENTY", "NUM"]  # the hub's integer order, not the card's alphabetical order


def test_fixture_is_self_written_and_small():
    assert len(read_fixture("train")) == 45


def test_offline_hub_fails_fast_with_the_alternative():
    with pytest.raises(BenchError, match="the Hub is unreachable. To run offline, put a local copy under DIR/sst2"):
        load_dataset("sst2")


def test_multi_label_hub_source_is_refused(monkeypatch):
    import datasets as hf_datasets

    table = hf_datasets.Dataset.from_dict({"text": ["a", "b"], "topics": [["earn"], ["acq", "earn"]]})
    monkeypatch.setattr(hf_datasets, "load_dataset", lambda *a, **k: table)
    monkeypatch.setattr(data_module, "hub_reachable", lambda: True)
    with pytest.raises(BenchError, match="several labels per row"):
        load_dataset("r52")


def test_require_fingerprint_names_the_change_and_the_fix():
    data = load_dataset(str(FIXTURE))
    data.require_fingerprint(data.fingerprint, "run x", "fix it")  # the same data: no error
    with pytest.raises(BenchError, match=r"the data of tiny changed since run x \(fingerprint .* != abc\); fix it"):
        data.require_fingerprint("abc", "run x", "fix it")


def test_find_named_takes_a_path_or_a_name_under_the_data_folders(tmp_path, monkeypatch):
    from bench.data.loading import find_named

    (tmp_path / "sets" / "imdb_contrast").mkdir(parents=True)
    assert find_named(str(tmp_path / "sets")) == tmp_path / "sets"
    assert find_named("imdb_contrast", str(tmp_path / "sets")) == tmp_path / "sets" / "imdb_contrast"
    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path / "sets"))
    assert find_named("imdb_contrast") == tmp_path / "sets" / "imdb_contrast"
    assert find_named("missing_set") is None
