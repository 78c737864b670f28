import json
import re
from dataclasses import dataclass

import pytest

from bench.errors import BenchError
from bench.registry import METHODS
from bench.cli.settings import load_config_file, parse_assignment, split_settings
from bench.spec import method_config
from conftest import FAST
from bench.methods.ce import CrossEntropy


@dataclass(frozen=True)
class KnobConfig:
    tau: float = 5.0
    pairs: tuple = ()
    views: int = 1


class WithKnobs(CrossEntropy):
    """CE with knobs, standing in for a contrastive method."""

    Config = KnobConfig


@pytest.fixture(autouse=True)
def knob_method():
    if "knobs-test" not in METHODS:
        METHODS.add("knobs-test", WithKnobs, "kt")


def test_parse_assignment_reads_yaml_values():
    assert parse_assignment("clld.tau=5") == ("clld.tau", 5)
    assert parse_assignment("lr=1e-4") == ("lr", 1e-4)
    assert parse_assignment("x.pairs=[[a, b]]") == ("x.pairs", [["a", "b"]])
    assert parse_assignment("pooling=mean") == ("pooling", "mean")
    with pytest.raises(BenchError, match="expected KEY=VALUE"):
        parse_assignment("lr")


def test_split_settings_by_kind_and_alias():
    train, knobs = split_settings({"lr": 1e-4, "epochs": 2, "kt.tau": 3, "knobs-test.pairs": [["a", "b"]]})
    assert train == {"lr": 1e-4, "epochs": 2}
    assert knobs == {"knobs-test": {"tau": 3.0, "pairs": (("a", "b"),)}}
    assert isinstance(knobs["knobs-test"]["tau"], float)


@pytest.mark.parametrize("settings,message", [
    ({"kt.temperature": 1}, "method 'knobs-test' has no setting 'temperature' (did you mean kt.tau?); its settings: "
                            "tau, pairs, views"),
    ({"knobs-test.tauu": 1}, "method 'knobs-test' has no setting 'tauu' (did you mean knobs-test.tau?)"),
    ({"kt.view": 1}, "has no setting 'view' (did you mean kt.views?)"),
    ({"kt.nope": 1}, "method 'knobs-test' has no setting 'nope'; its settings: tau, pairs, views"),
    ({"kt.views": 1.5}, "kt.views must be a int"),
    ({"kt.tau": "high"}, "kt.tau must be a float"),
    ({"learning_rate": 1}, "unknown setting 'learning_rate'"),
    ({"lr": "fast"}, "lr must be a float"),
    ({"nomethod.tau": 1}, "unknown method 'nomethod'"),
])
def test_bad_settings(settings, message):
    with pytest.raises(BenchError, match=re.escape(message)):
        split_settings(settings)


def test_method_config_merges_defaults():
    assert method_config("knobs-test", {"tau": 1.0}) == (("pairs", ()), ("tau", 1.0), ("views", 1))


def test_config_file(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text("methods: [ce, kt]\ndatasets: tiny\nencoder: tiny-bert\nseeds: 1-2\nlr: 0.001\n"
                    "kt: {tau: 2}\nknobs-test.views: 2\ndata-dir: /x\n")
    run, settings = load_config_file(str(path))
    assert run == {"methods": ["ce", "kt"], "datasets": "tiny", "encoders": "tiny-bert", "seeds": "1-2",
                   "data_dir": "/x"}
    assert settings == {"lr": 0.001, "kt.tau": 2, "knobs-test.views": 2}


def test_config_file_errors(tmp_path):
    with pytest.raises(BenchError, match="cannot read config file"):
        load_config_file(str(tmp_path / "missing.yaml"))
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    with pytest.raises(BenchError, match="must be a YAML mapping"):
        load_config_file(str(tmp_path / "list.yaml"))


def test_cli_set_and_config_reach_the_run(cli, tiny, results, tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(f"methods: kt\ndatasets: {tiny}\nseeds: [3]\nkt: {{tau: 2}}\n")
    code, _, err = cli("run", "--config", config, *FAST, "--set", "kt.views=2", "--set", "lr=0.002")
    assert code == 0, err
    spec = json.loads(next(results.glob("knobs-test_tiny_tiny-bert_s3_*/spec.json")).read_text())
    assert spec["method_config"] == {"pairs": [], "tau": 2.0, "views": 2}
    assert spec["train"]["lr"] == 0.002  # --set wins over the --lr flag in FAST
    assert "knobs-test.tau=2.0" in spec["canonical"]


def test_cli_bad_set_is_one_line(cli, tiny):
    code, _, err = cli("run", "--datasets", tiny, *FAST, "--set", "kt.nope=1")
    assert code == 2 and err.startswith("error: method 'knobs-test' has no setting 'nope'")


def test_shipped_config_files_are_valid():
    from pathlib import Path

    from bench.cli.common import seed_list
    from bench.cli.settings import grid_axes, regime_lists
    from bench.running.grid import check_axes, regimes

    for path in sorted((Path(__file__).resolve().parent.parent / "configs").glob("*.yaml")):
        run, settings = load_config_file(str(path))
        for method in run["methods"]:
            assert method in METHODS, (path.name, method)
        regimes(regime_lists(settings))
        split_settings(settings)
        check_axes(grid_axes([], run.get("grid")), [METHODS.canonical(m) for m in run["methods"]], {})
        assert seed_list(str(run["seeds"]))


def test_a_set_for_a_method_that_does_not_run_is_named(cli, tiny, results):
    code, _, err = cli("run", "--datasets", tiny, "--methods", "ce", *FAST, "--set", "supcon.tau=0.1",
                       "--set", "clld.tau=3", "--results-dir", results)
    assert code == 0, err
    notes = [line for line in err.splitlines() if "has no effect" in line]
    assert notes == ["clbench: note: --set supcon.tau=0.1 has no effect: supcon is not among the methods of this run (ce)",
                     "clbench: note: --set clld.tau=3 has no effect: clld is not among the methods of this run (ce)"]
    code, _, err = cli("run", "--datasets", tiny, "--methods", "clld", *FAST, "--set", "clld-adaptive.tau=3",
                       "--results-dir", results)
    assert code == 0 and "has no effect" not in err   # an alias of a method that runs
