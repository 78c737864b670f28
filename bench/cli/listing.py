"""`clbench list`: the registered methods, datasets, encoders and evaluators (with --verbose, their settings)."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """The `clbench list` subcommand and its arguments."""
    lister = sub.add_parser("list", parents=[common], help="list registered methods, datasets or encoders")
    lister.add_argument("what", choices=["methods", "datasets", "encoders", "evaluators"])
    lister.add_argument("--verbose", "-v", action="store_true", help="show settings and details")


def cmd_list(args: argparse.Namespace) -> int:
    """Print the registered methods, datasets or encoders."""
    import bench.methods  # noqa: F401
    from bench.data import cards  # noqa: F401
    from bench.encoders import models as encoders
    from bench.registry import DATASETS, ENCODERS, METHODS
    from bench.spec import variant_knobs

    if args.what == "methods":
        for name, cls in METHODS.items():
            aliases = METHODS.aliases_of(name)
            print(f"{name}{' (' + ', '.join(aliases) + ')' if aliases else ''}: {first_line(cls.__doc__)}")
            if args.verbose:
                for knob, value in cls.config_fields().items():  # as typed: `--set supcon.lambda=0.5`
                    print(f"    {name}.{knob.rstrip('_')} = {value!r}")
                for variant, implied in variant_knobs(cls).items():  # what --set NAME.variant=V also sets
                    knobs = ", ".join(f"{knob.rstrip('_')}={value!r}" for knob, value in implied.items())
                    print(f"    variant {variant} implies: {knobs} (an explicit --set wins)")
    elif args.what == "datasets":
        for name, card in DATASETS.items():
            sizes = "/".join(str(card.sizes.get(s) or "-") for s in ("train", "validation", "test"))
            print(f"{name:10s} {len(card.labels):3d} classes  {sizes:>18s}  {card.title}")
            if args.verbose:
                hub = (card.hub or {}).get("id") or "-"
                print(f"    hub: {hub}; local files: {', '.join(card.local_splits) or '-'}; paper: "
                      f"{card.paper or '-'}")
    elif args.what == "evaluators":
        import bench.evaluators  # noqa: F401
        from bench.registry import EVALUATORS

        for name, cls in EVALUATORS.items():
            print(f"{name}: {first_line(cls.__doc__)}")
            if args.verbose and cls.option_names:
                print(f"    options: {', '.join('--' + o.replace('_', '-') for o in cls.option_names)}")
    else:
        for name, factory in ENCODERS.items():
            print(f"{name}: {first_line(factory.__doc__)}")
        print("(any other name is loaded as a Hugging Face model id or a local model folder)")
    return 0


def first_line(doc: str | None) -> str:
    """The first line of a docstring."""
    return (doc or "").strip().splitlines()[0] if doc else ""
