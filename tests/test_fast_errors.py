"""A mistaken `clbench run` fails before torch is imported: names, knobs, settings, folders and files are checked
against bench.catalog (the registries' contents read from source) first. The catalog must match the real
registries exactly, or a new method, encoder or evaluator would be refused (or its knobs misjudged)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bench import catalog
from bench.errors import BenchError
from conftest import FIXTURE

HEAVY = ("torch", "transformers", "sklearn", "pandas", "datasets")


def real_registry(kind: str):
    """The real registry of `kind`, filled by importing its package, restricted to the project's own entries
    (tests register extra methods at run time)."""
    import bench.encoders.models  # noqa: F401
    import bench.evaluators  # noqa: F401
    import bench.methods  # noqa: F401

    registry = catalog.REAL[kind]
    home = {"method": "bench.methods.", "encoder": "bench.encoders.models", "evaluator": "bench.evaluators."}[kind]
    return {name: (obj, tuple(registry.aliases_of(name))) for name, obj in registry.items()
            if obj.__module__.startswith(home)}


@pytest.mark.parametrize("kind", ["method", "encoder", "evaluator"])
def test_catalog_holds_exactly_the_registered_names_and_aliases(kind):
    parsed = {e.name: tuple(sorted(e.aliases)) for e in catalog.parse(kind)}
    assert parsed == {name: aliases for name, (_, aliases) in real_registry(kind).items()}


def test_catalog_holds_every_methods_knobs_and_defaults():
    entries = {e.name: e for e in catalog.parse("method")}
    for name, (cls, _) in real_registry("method").items():
        real = cls.config_fields()
        assert entries[name].config_fields() == real, name
        assert list(entries[name].config_fields()) == list(real), name  # the order `its settings:` lists
        for knob, default in real.items():
            assert type(entries[name].config_fields()[knob]) is type(default), (name, knob)
    assert entries["ce"].config_fields() == {}  # NoConfig, inherited from Method


def test_catalog_holds_every_methods_variant_knobs():
    """VARIANT_KNOBS, read from source, is the real Config's; each names real knobs, and the field defaults are
    those of the default variant (so `config_fields()` tells the defaults a plain run resolves to)."""
    entries = {e.name: e for e in catalog.parse("method")}
    for name, (cls, _) in real_registry("method").items():
        real = cls.variant_knobs()
        assert entries[name].variant_knobs() == real, name
        fields = cls.config_fields()
        for variant, implied in real.items():
            assert set(implied) <= set(fields) - {"variant"}, (name, variant)
        if real:
            assert {k: fields[k] for k in real[fields["variant"]]} == real[fields["variant"]], name
    assert entries["cline"].variant_knobs() == {
        "released": {"sentence_loss": "bce", "weights": "learned", "redraw_same_word": False},
        "paper": {"sentence_loss": "eq6", "weights": "fixed", "redraw_same_word": True}}


@pytest.mark.parametrize("knobs", [{}, {"variant": "paper"}, {"variant": "paper", "weights": "learned"},
                                   {"variant": "released", "sentence_loss": "eq6"}, {"lambda_cts": 0.5}])
def test_method_config_from_the_catalog_is_the_real_registrys(knobs):
    """The knob set a run is keyed by, variant implications included, is the same read from source or imported."""
    import bench.methods  # noqa: F401
    from bench.registry import METHODS
    from bench.spec import method_config

    entries = {e.name: e for e in catalog.parse("method")}
    light = catalog.Registry(METHODS.kind)
    light.add("cline", entries["cline"])
    assert method_config("cline", knobs, light) == method_config("cline", knobs, METHODS)


def test_registry_is_the_real_one_once_imported():
    import bench.methods  # noqa: F401

    assert catalog.registry("method") is catalog.REAL["method"]


def registrations(source: str) -> list[catalog.Entry]:
    return catalog.registrations(ast.parse(textwrap.dedent(source)), "METHODS", "x.py")


def test_registrations_in_decorators_calls_and_literal_loops():
    found = registrations("""
        KINDS = {"a": 1, "b": 2}

        @METHODS.register("one", "uno")
        class One: ...

        METHODS.add("two", Two, "dos")
        for kind in KINDS:
            METHODS.add(kind, make(kind))
    """)
    assert [(e.name, e.aliases, e.target) for e in found] == [
        ("one", ("uno",), "One"), ("two", ("dos",), "Two"), ("a", (), ""), ("b", (), "")]


@pytest.mark.parametrize("source", [
    "def later():\n    METHODS.add('hidden', object())",  # only running the module would tell
    "if FLAG:\n    METHODS.add('maybe', object())",
    "NAME = compute()\nMETHODS.add(NAME, object())",  # not a literal
    "@METHODS.register(*NAMES)\nclass A: ...",
])
def test_what_the_reader_cannot_follow_is_an_error_not_a_guess(source):
    with pytest.raises(catalog.CatalogError):
        registrations(source)


def test_unreadable_sources_fall_back_to_importing(monkeypatch):
    def unreadable(kind):
        raise catalog.CatalogError("test")

    imported = []
    monkeypatch.setattr(catalog, "parse", unreadable)
    monkeypatch.delitem(sys.modules, "bench.encoders.models", raising=False)  # as if not imported yet (put back after)
    monkeypatch.setattr(catalog.importlib, "import_module", imported.append)
    assert catalog.registry("encoder") is catalog.REAL["encoder"] and imported == ["bench.encoders.models"]


@pytest.mark.parametrize("name", ["nosuch-encoder", "FOLDER"])
def test_light_encoder_check_says_what_check_encoder_says(tmp_path, name):
    from bench.encoders.models import canonical_encoder, check_encoder
    from bench.hub import check_encoder_source

    if name == "FOLDER":  # a folder without config.json
        (tmp_path / "enc").mkdir()
        name = str(tmp_path / "enc")
    with pytest.raises(BenchError) as light:
        check_encoder_source(name, catalog.registry("encoder"))
    with pytest.raises(BenchError) as real:
        check_encoder(canonical_encoder(name))
    assert str(light.value) == str(real.value)


def test_knob_values_are_still_checked_by_the_methods_config(cli, tmp_path):
    code, _, err = cli("run", "--methods", "clld", "--datasets", FIXTURE, "--encoder", "tiny-bert",
                       "--set", "clld.tau=-1", "--results-dir", tmp_path / "r")
    assert code == 2 and err == "error: tau must be > 0\n"


BAD_KNOBS = [("cl", {"tau": 0}), ("clld-static", {}), ("clld-static", {"pairs": (("a", "b"),), "top_k": 0}),
             ("clld-adaptive", {"warmup_fraction": 2}), ("supcon", {"views": 3}), ("lcl", {"weighting": "x"}),
             ("cline", {"syn_rate": 2}), ("dcl", {"views": "x"})]


@pytest.mark.parametrize("method,knobs", BAD_KNOBS)
def test_configs_built_from_source_check_knob_values_as_the_real_ones(method, knobs):
    """The catalog's Config runs the method's own __post_init__ lines: same defaults, same refusals."""
    import bench.methods  # noqa: F401  (the real classes, to compare with)
    from bench.registry import METHODS

    entry = catalog.parse("method")
    light = next(e for e in entry if e.name == method).Config
    real = METHODS.get(method).Config
    assert light is not real and light.__name__ == real.__name__
    fields = {**METHODS.get(method).config_fields(), **knobs}
    with pytest.raises(BenchError) as from_source:
        light(**fields)
    with pytest.raises(BenchError) as from_module:
        real(**fields)
    assert str(from_source.value) == str(from_module.value)
    if method != "clld-static":
        assert light() == light() and repr(light()) == repr(real())  # defaults alike


# ----------------------------------------------------------------------------------------------- without torch

LIGHT_SCRIPT = """
import json, sys
from bench.cli.main import main
from bench.registry import METHODS

HEAVY = {heavy!r}
METHODS.add("runtime-test", type("RuntimeTest", (), {{"config_fields": classmethod(lambda cls: {{"k": 1}})}}))
results = []
for args in json.loads(sys.argv[1]):
    code = main(args)
    results.append([code, sorted(m for m in HEAVY if m in sys.modules)])
print(json.dumps(results))
"""


def light_cases(tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    """id -> (arguments after `clbench run`, words of the one-line error)."""
    (tmp_path / "afile").write_text("x")
    (tmp_path / "no-config").mkdir()
    (tmp_path / "section.yaml").write_text("methods: clld\nclld:\n  tau: 3\n  taux: 1\n")
    (tmp_path / "knobs.yaml").write_text("methods: [supcon]\nsupcon.views: many\n")
    (tmp_path / "MYDATA" / "sst2").mkdir(parents=True)
    return {
        "unknown-method": (["--methods", "supcom"], "unknown method 'supcom'. Did you mean 'supcon'? Known methods: "
                                                    "Mirror-BERT, SimCSE, ce, cl, cline, clld, clld-adaptive, "
                                                    "clld-static, dcl, lcl, mirror-bert, mirrorbert, runtime-test, "
                                                    "simcse, supcon"),
        "unknown-knob": (["--set", "clld.tauu=3"], "method 'clld-adaptive' has no setting 'tauu' (did you mean "
                                                   "clld.tau?); its settings: tau, ce_weight, projection, "
                                                   "update_every, evals_per_epoch, warmup_fraction, min_updates"),
        "knob-by-another-name": (["--methods", "supcon", "--set", "supcon.temp=0.1"],
                                 "method 'supcon' has no setting 'temp' (did you mean supcon.tau?); its settings: "),
        "knob-by-a-prefix": (["--set", "clld.warmup=0.1"], "has no setting 'warmup' (did you mean "
                                                           "clld.warmup_fraction?)"),
        "knob-by-the-papers-name": (["--set", "clld.lambda=0.7"], "has no setting 'lambda' (did you mean "
                                                                  "clld.ce_weight?)"),
        "unknown-method-in-a-knob": (["--set", "supcom.tau=0.1"], "unknown method 'supcom'. Did you mean 'supcon'?"),
        "knob-typo-in-a-grid": (["--methods", "supcon", "--grid", "supcon.temp=0.1,0.3"],
                                "method 'supcon' has no setting 'temp' (did you mean supcon.tau?)"),
        "knob-of-a-runtime-method": (["--set", "runtime-test.j=1"], "method 'runtime-test' has no setting 'j'; its "
                                                                    "settings: k"),
        "knob-value-out-of-range": (["--methods", "clld", "--set", "clld.tau=-1"], "tau must be > 0"),
        "knob-of-wrong-type": (["--set", "clld.tau=abc"], "clld.tau must be a float (default 5.0), got 'abc'"),
        "int-knob-given-a-fraction": (["--set", "supcon.views=1.5"], "supcon.views must be a int (default 1), got 1.5"),
        "knob-in-a-config-section": (["--config", str(tmp_path / "section.yaml")],
                                     "method 'clld-adaptive' has no setting 'taux'"),
        "knob-type-in-a-config-file": (["--config", str(tmp_path / "knobs.yaml")],
                                       "supcon.views must be a int (default 1), got 'many'"),
        "unknown-setting": (["--set", "lrate=1"], "unknown setting 'lrate'"),
        "unknown-evaluator": (["--evaluators", "chcklist"], "unknown evaluator 'chcklist'. Did you mean 'checklist'?"),
        "unknown-attack-mode": (["--attack-mode", "x"], "unknown attack mode 'x'"),
        "unknown-dataset": (["--datasets", "trek"], "unknown dataset 'trek'. Did you mean 'trec'?"),
        "missing-dataset-folder": (["--datasets", "MYDATA/sst33"], f"dataset folder MYDATA/sst33 does not exist in "
                                                                   f"{tmp_path} (did you mean MYDATA/sst2?)"),
        "card-without-local-copy-offline": (["--datasets", "mr"], "could not load 'mr' from the Hugging Face Hub"),
        "no-epochs": (["--epochs", "0"], "--epochs must be >= 1"),
        "bad-results-dir": (["--results-dir", str(tmp_path / "afile" / "r")], "afile is a file"),
        **({"results-dir-in-proc": (["--results-dir", "/proc/clbench-x"], "cannot be created: /proc refuses new "
                                    "folders (ENOENT")} if Path("/proc/self").is_dir() else {}),  # even for root
        "seeds-not-a-list": (["--seeds", "a,b"], "argument --seeds: seeds must look like 1,2,3 or 1-3, not 'a,b'"),
        "missing-value": (["--seeds"], "argument --seeds: expected a value: e.g. 1,2,3 or 1-3"),
        "missing-data-dir": (["--data-dir", str(tmp_path / "nowhere")], "does not exist"),
        "unknown-encoder": (["--encoder", "minilmm"], "cannot load encoder 'minilmm': it is not a registered short "
                                                      "name (bert-base-random, minilm,"),
        "encoder-folder-without-config": (["--encoder", str(tmp_path / "no-config")], "has no config.json"),
        "no-jobs": (["--jobs", "0"], "--jobs must be >= 1"),
    }


def test_mistakes_fail_before_torch_is_imported(tmp_path):
    """Each mistake, in one fresh interpreter: exit code 2, the message, and none of torch, transformers,
    sklearn, pandas or datasets imported (the runtime-registered method stands for those tests add)."""
    cases = light_cases(tmp_path)
    base = ["run", "--methods", "ce", "--datasets", str(FIXTURE), "--encoder", "tiny-bert",
            "--results-dir", str(tmp_path / "results")]
    argv = [base + args for args, _ in cases.values()]  # later flags win (--methods, --encoder, --results-dir)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "BENCH_RESULTS_DIR": str(tmp_path / "results")}
    env.pop("BENCH_DATA_DIR", None)
    done = subprocess.run([sys.executable, "-c", LIGHT_SCRIPT.format(heavy=HEAVY), json.dumps(argv)],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == len(cases), done.stderr
    for (case, (_, words)), (code, heavy), error in zip(cases.items(), json.loads(done.stdout), errors):
        assert code == 2, (case, error)
        assert words in error, (case, error)
        assert heavy == [], f"{case}: imported {heavy} before failing"
