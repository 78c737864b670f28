"""`clbench export RUN DIR`: a finished run's model as a standard Hugging Face sequence-classification folder, and
the checks of `clbench run --save-format` (which writes one into each run folder)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from bench.cli.common import RESULTS_HELP, check_output_folder, comma_list
from bench.errors import BenchError
from bench.results.store import results_dir as resolve_results_dir

SAVE_FORMATS = ("safetensors", "hf")  # model.safetensors (what `clbench evaluate RUN` reads), the folder <run>/hf/
NOT_TRANSFORMERS = ("textcnn", "textcnn-glove")  # encoders with no Hugging Face format


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """The `clbench export` subcommand and its arguments."""
    export = sub.add_parser("export", parents=[common], help="write a run's model as a Hugging Face folder",
                            description="Write a finished run's model (model.safetensors) as a Hugging Face sequence-"
                                        "classification folder (safetensors weights, config.json with the label "
                                        "names, the tokenizer) that AutoModelForSequenceClassification and "
                                        "AutoTokenizer load; its logits are checked against the run's model.")
    export.add_argument("run", metavar="RUN", help="a run key, a glob pattern matching one run, or a run folder")
    export.add_argument("folder", metavar="DIR", help="the folder to write")
    export.add_argument("--results-dir", default=None, help=RESULTS_HELP)
    export.add_argument("--data-dir", default=None, help="where the run's dataset is (default: as recorded)")
    export.add_argument("--device", default="cpu", help="where the run's model is rebuilt: cpu (default) | cuda")
    export.add_argument("--overwrite", action="store_true", help="replace DIR if it is not empty")


def cmd_export(args: argparse.Namespace) -> int:
    """Export one finished run to a Hugging Face folder and say how to load it."""
    check_output_folder(args.folder, "export folder", "DIR")  # before torch is imported
    from bench.results.store import find_runs
    from bench.running.export import export_run
    from bench.training.setup import resolve_device

    runs = find_runs(resolve_results_dir(args.results_dir), [args.run])
    if len(runs) != 1:
        names = ", ".join(r.name for r in runs[:3]) + (", ..." if len(runs) > 3 else "")
        raise BenchError(f"{args.run!r} matches {len(runs)} runs ({names}); name one run to export")
    folder = Path(args.folder)
    summary = export_run(runs[0], folder, resolve_device(args.device), args.data_dir, args.overwrite)
    print(f"clbench: exported {runs[0].name} -> {folder} ({summary['class']}, labels: "
          f"{', '.join(summary['labels'])}; largest logit gap to the run's model on its test texts: "
          f"{summary['max_logit_gap']:.1e}; a README.md model card, the test metrics in clbench_export.json)",
          file=sys.stderr)
    if summary.get("collapsed"):
        print(f"clbench: warning: {runs[0].name} collapsed: the model predicts one class whatever the input and is "
              "not a result (exported anyway; its model card says so)", file=sys.stderr)
    print(f"from transformers import AutoModelForSequenceClassification, AutoTokenizer\n"
          f"model = AutoModelForSequenceClassification.from_pretrained({str(folder)!r})\n"
          f"tokenizer = AutoTokenizer.from_pretrained({str(folder)!r})")
    return 0


def save_formats(given: str | None, save_model: bool, opts: Any) -> tuple[str, ...]:
    """`--save-format` checked: `safetensors` (default; `pt`, its name before, is read as it), `hf`,
    `safetensors,hf` or `both`; a BenchError for an unknown format, for --no-save-model beside it, and for `hf`
    with a model that has no Hugging Face format (TextCNN, mean pooling). `opts`: the run's RunOptions."""
    if given is None:
        return ("safetensors",)
    names = list(SAVE_FORMATS) if given.strip() == "both" else [
        "safetensors" if n == "pt" else n for n in comma_list(given)]
    unknown = [n for n in names if n not in SAVE_FORMATS]
    if unknown or not names:
        raise BenchError(f"--save-format {given!r}: use safetensors, hf, safetensors,hf or both")
    if not save_model:
        raise BenchError("--no-save-model keeps no weights and --save-format says how to keep them; give one")
    if "hf" in names:
        encoders = [e for e in opts.encoders if e in NOT_TRANSFORMERS]
        if encoders:
            raise BenchError(f"--save-format hf: encoder {encoders[0]} is not a Hugging Face transformer and has no "
                             "Hugging Face format; use --save-format safetensors")
        if str(opts.overrides.get("pooling", "")) == "mean":
            raise BenchError("--save-format hf: --pooling mean has no stock Hugging Face sequence-classification "
                             "head (they classify from the first token); use --pooling cls (the default) or pooler")
    return tuple(f for f in SAVE_FORMATS if f in names)
