"""`clbench list` prints static facts: it imports neither torch nor transformers, and what it prints (read from
source by bench.catalog) is what the real registries, imported, would print."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
import textwrap

import pytest

from bench import catalog
from bench.cli.main import main
from conftest import ROOT

KINDS = ("methods", "encoders", "datasets", "evaluators")
LIST_ALL = "; ".join(f"main(['list', {kind!r}, '--verbose'])" for kind in KINDS)


def python(code: str) -> str:
    """stdout of a fresh `python -c CODE` in the checkout."""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_list_imports_no_torch_and_prints_what_the_real_registries_hold():
    light = python(f"import sys; from bench.cli.main import main; {LIST_ALL}; "
                   "print([m for m in ('torch', 'transformers') if m in sys.modules])")
    heavy = python(f"import bench.methods, bench.encoders.models, bench.evaluators; from bench.cli.main import main; "
                   f"{LIST_ALL}; print([])")
    assert light.splitlines()[-1] == "[]"
    assert light == heavy
    assert "tiny-bert: A tiny random BertConfig (2 layers, d=32) for tests; no download." in light
    assert "ce: Cross-entropy" in light and "supcon.tau = " in light


@pytest.mark.parametrize("kind", ["encoders", "methods"])
def test_one_kind_alone_imports_no_torch(kind):
    assert python(f"import sys; from bench.cli.main import main; main(['list', {kind!r}]); "
                  "print('torch' in sys.modules)").splitlines()[-1] == "False"


@pytest.mark.parametrize("kind", ["method", "encoder"])
def test_the_catalogs_docstrings_are_the_real_ones(kind):
    import bench.encoders.models  # noqa: F401
    import bench.methods  # noqa: F401

    for entry in catalog.parse(kind):
        real = catalog.REAL[kind].get(entry.name)
        assert entry.doc == inspect.cleandoc(real.__doc__ or ""), entry.name


def added(source: str) -> list[catalog.Entry]:
    return catalog.registrations(ast.parse(textwrap.dedent(source)), "ENCODERS", "x.py")


def test_docstrings_of_added_objects_and_of_factories():
    found = added('''
        SIZES = {"small": 2, "large": 24}

        def named():
            """Added by name."""

        def factory(size):
            def build():
                pass
            build.__doc__ = f"{SIZES[size]} layers"
            return build

        def opaque(size):
            return lambda: size

        ENCODERS.add("named", named)
        for size in SIZES:
            ENCODERS.add(size, factory(size))
        ENCODERS.add("opaque", opaque("small"))
        ENCODERS.add("elsewhere", imported)
    ''')
    assert [(e.name, e.doc) for e in found] == [("named", "Added by name."), ("small", "2 layers"),
                                                ("large", "24 layers"), ("opaque", None), ("elsewhere", None)]


def test_an_unreadable_docstring_lists_the_real_registry(monkeypatch, capsys):
    """Where the catalog cannot read a docstring for certain, `clbench list` imports the real registry."""
    import bench.encoders.models  # noqa: F401  (what the fallback imports: imported here, not by a patched importlib)
    from bench.cli import listing

    unreadable = catalog.Registry("encoder")
    unreadable.add("mystery", catalog.Entry("mystery", (), "", "x.py"))  # doc None: not read
    monkeypatch.setattr(catalog, "registry", lambda kind: unreadable)
    assert listing.registered("encoder") is catalog.REAL["encoder"]
    assert main(["list", "encoders"]) == 0
    assert "mystery" not in capsys.readouterr().out
