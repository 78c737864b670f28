"""The campaign's command line: `pack DIR`, `run PART`, `report DIR...` (see benchmarks.campaign)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.cli.common import StrictParser
from bench.errors import BenchError
from benchmarks.campaign.parts import PART_BUDGET_S, PARTS, get_part

PROG = "bash scripts/gpu-campaign.sh"


def build_parser() -> StrictParser:
    """The parser of pack, run and report."""
    parser = StrictParser(prog=PROG, description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=StrictParser)
    pack = commands.add_parser("pack", help="write the folders a device call carries, and print each part's call")
    pack.add_argument("dir", type=Path, help="the pack folder (inside the repository, so that `carry` can name it)")
    pack.add_argument("--data-dir", type=Path, default=None,
                      help="the data sets (default: $BENCH_DATA_DIR, else ../shared/data beside the repository)")
    pack.add_argument("--word-vectors", default="counter-fitted",
                      help="the attack's vectors to cut (default: counter-fitted, as clbench run uses)")
    pack.add_argument("--parts", default=",".join(PARTS), help=f"parts to pack for (default: all: {', '.join(PARTS)})")
    pack.add_argument("--no-download", action="store_true",
                      help="no third-party wheels (offline; the device then lacks nltk, submitit, import-linter)")
    pack.add_argument("--no-minilm", action="store_true", help="no MiniLM stand-in (toy packs)")
    run = commands.add_parser("run", help="run one part's steps (on the device, or --dry-run here at toy scale)")
    run.add_argument("part", help=f"one of {', '.join(PARTS)}")
    run.add_argument("--out", type=Path, required=True, help="where the JSON record, log and files go ($OUT there)")
    run.add_argument("--pack", type=Path, default=None, help="the carried pack folder (required without --dry-run)")
    run.add_argument("--dry-run", action="store_true", help="toy scale on this machine: tiny-bert, a fixture set")
    run.add_argument("--budget-s", type=float, default=PART_BUDGET_S,
                     help=f"seconds the part may take in all (default {PART_BUDGET_S}: a device command may run 600)")
    run.add_argument("--only", default=None, metavar="STEP,...", help="run only these steps of the part")
    run.add_argument("--scratch", type=Path, default=None, help="scratch folder (default: under the temp folder)")
    report = commands.add_parser("report", help="the README's GPU tables from returned records")
    report.add_argument("dirs", nargs="+", type=Path, help="folders (or files) holding the parts' JSON records")
    report.add_argument("--output", type=Path, default=None, help="write the Markdown here instead of stdout")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one campaign command; exit 2 with one line on a mistake."""
    try:
        args = build_parser().parse_args(argv)
        if args.command == "pack":
            from benchmarks.campaign.pack import build_pack

            return build_pack(args.dir, args.data_dir, [p for p in args.parts.split(",") if p], args.word_vectors,
                              download=not args.no_download, minilm=not args.no_minilm)
        if args.command == "run":
            from benchmarks.campaign.runner import run_part

            try:
                part = get_part(args.part)
            except KeyError as exc:
                raise BenchError(exc.args[0]) from None
            only = [s for s in args.only.split(",") if s] if args.only else None
            return run_part(part, args.out, Path.cwd(), args.dry_run, args.pack, args.budget_s, only, args.scratch)
        from benchmarks.campaign.report import render

        text = render(args.dirs)
        if args.output:
            args.output.write_text(text, encoding="utf-8")
        else:
            sys.stdout.write(text)
        return 0
    except BenchError as exc:  # UsageError included
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
