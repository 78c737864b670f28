"""`clbench list`: the registered methods, datasets, encoders and evaluators (with --verbose, their settings)."""

from __future__ import annotations

import argparse
import importlib
from typing import Any


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """The `clbench list` subcommand and its arguments."""
    lister = sub.add_parser("list", parents=[common], help="list registered methods, datasets or encoders")
    lister.add_argument("what", choices=["methods", "datasets", "encoders", "evaluators"])
    lister.add_argument("--verbose", "-v", action="store_true", help="show settings and details")


def cmd_list(args: argparse.Namespace) -> int:
    """Print the registered methods, datasets or encoders (without importing torch: read from source)."""
    from bench.spec import variant_knobs

    if args.what == "methods":
        methods = registered("method")
        for name, cls in methods.items():
            aliases = methods.aliases_of(name)
            print(f"{name}{' (' + ', '.join(aliases) + ')' if aliases else ''}: {first_line(described(cls))}")
            if args.verbose:
                for knob, value in cls.config_fields().items():  # as typed: `--set supcon.lambda=0.5`
                    print(f"    {name}.{knob.rstrip('_')} = {value!r}")
                for variant, implied in variant_knobs(cls).items():  # what --set NAME.variant=V also sets
                    knobs = ", ".join(f"{knob.rstrip('_')}={value!r}" for knob, value in implied.items())
                    print(f"    variant {variant} implies: {knobs} (an explicit --set wins)")
    elif args.what == "datasets":
        from bench.data import cards  # noqa: F401  (registers the cards: YAML only)
        from bench.registry import DATASETS

        for name, card in DATASETS.items():
            sizes = "/".join(str(card.sizes.get(s) or "-") for s in ("train", "validation", "test"))
            print(f"{name:10s} {len(card.labels):3d} classes  {sizes:>18s}  {card.title}")
            if args.verbose:
                hub = (card.hub or {}).get("id") or "-"
                print(f"    hub: {hub}; local files: {', '.join(card.local_splits) or '-'}; paper: "
                      f"{card.paper or '-'}")
    elif args.what == "evaluators":
        import bench.evaluators  # noqa: F401  (no torch at import)
        from bench.registry import EVALUATORS

        for name, cls in EVALUATORS.items():
            print(f"{name}: {first_line(cls.__doc__)}")
            if args.verbose and cls.option_names:
                print(f"    options: {', '.join('--' + o.replace('_', '-') for o in cls.option_names)}")
    else:
        from bench.encoders.learning_rates import WORKING_LR

        for name, factory in registered("encoder").items():
            print(f"{name}: {first_line(described(factory))}")
            if args.verbose and name in WORKING_LR:  # measured: what the collapse warnings suggest
                print(f"    trains without collapse at --lr {WORKING_LR[name][0]} ({WORKING_LR[name][1]})")
        print("(any other name is loaded as a Hugging Face model id or a local model folder)")
    return 0


def registered(kind: str) -> Any:
    """The registry of `kind` ("method" or "encoder") as bench.catalog reads it from source (no torch), or the
    real one, imported, where a docstring there cannot be read for certain."""
    from bench import catalog

    found = catalog.registry(kind)
    if any(isinstance(obj, catalog.Entry) and obj.doc is None for _, obj in found.items()):
        importlib.import_module(catalog.PACKAGES[kind])
        return catalog.REAL[kind]
    return found


def described(obj: Any) -> str | None:
    """The docstring of a registered object, or of what a bench.catalog Entry stands for."""
    from bench.catalog import Entry

    return obj.doc if isinstance(obj, Entry) else obj.__doc__


def first_line(doc: str | None) -> str:
    """The first line of a docstring."""
    return (doc or "").strip().splitlines()[0] if doc else ""
