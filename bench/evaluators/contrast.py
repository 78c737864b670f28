"""Contrast sets (Gardner et al. 2020): accuracy on originals, on contrast examples, and pair consistency."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from bench.results import store
from bench.data.files import find_split_file, read_rows
from bench.data.loading import TextData, find_named
from bench.errors import BenchError, SkipEvaluator
from bench.evaluators.base import EvalContext, EvalOptions, Evaluation, Evaluator
from bench.registry import DATASETS, EVALUATORS

KINDS = ("original", "contrast")
FIELDS = ("id", "text", "label", "pair_id", "kind")


def default_contrast_set(dataset: str) -> str:
    """The contrast set a dataset's card names (e.g. `imdb_contrast` for sentiment sets), or ''."""
    card = DATASETS.get(dataset) if dataset in DATASETS else None
    return str(((card.evaluation if card else None) or {}).get("contrast_set") or "")


def resolve_set(name_or_path: str, data_dir: str) -> Path:
    """A contrast-set folder or file from a path or a name looked up under the data folders."""
    path = find_named(name_or_path, data_dir or None)
    if path is not None:
        return path
    raise SkipEvaluator(f"contrast set {name_or_path!r} not found (give --contrast-set PATH or --data-dir "
                        "with that folder)")


def read_pairs(path: Path, split: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(original, contrast) row pairs from a folder (its `split` file) or a single file, checked."""
    file = find_split_file(path, split) if path.is_dir() else path
    if file is None:
        raise BenchError(f"contrast set {path} has no {split} file ({split}.jsonl[.gz]); pick another "
                         "--contrast-split")
    by_pair: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for number, row in enumerate(read_rows(file), start=1):
        missing = [f for f in FIELDS if f not in row]
        if missing:
            raise BenchError(f"row {number} of {file} lacks {', '.join(missing)}; contrast rows need "
                             f"{', '.join(FIELDS)}")
        if row["kind"] not in KINDS:
            raise BenchError(f"row {number} of {file} has kind {row['kind']!r}; use 'original' or 'contrast'")
        if row["kind"] in by_pair[str(row["pair_id"])]:
            raise BenchError(f"row {number} of {file}: pair {row['pair_id']!r} has two {row['kind']} rows")
        by_pair[str(row["pair_id"])][row["kind"]] = row
    incomplete = [p for p, rows in by_pair.items() if len(rows) != 2]
    if incomplete:
        raise BenchError(f"{file}: {len(incomplete)} pair(s) lack an original or a contrast row "
                         f"(first: {incomplete[0]!r})")
    if not by_pair:
        raise BenchError(f"contrast set {file} is empty")
    return [(rows["original"], rows["contrast"]) for _, rows in sorted(by_pair.items())]


@EVALUATORS.register("contrast")
class ContrastSets(Evaluator):
    """Contrast sets: accuracy on originals and on contrast examples, and contrast consistency."""

    name = "contrast"
    option_names = ("contrast_set", "contrast_split")

    def source(self, ctx: EvalContext) -> str:
        """The contrast set to use: --contrast-set, else the dataset card's default."""
        return ctx.options.contrast_set or default_contrast_set(ctx.data.name)

    def skip_reason(self, ctx: EvalContext) -> str | None:
        """Why not: the dataset's card names no contrast set and none was given."""
        if not self.source(ctx):
            return (f"no contrast set for dataset {ctx.data.name!r} (its card names none; give --contrast-set "
                    "PATH to a folder of id/text/label/pair_id/kind rows)")
        return None

    def check(self, options: EvalOptions, data: TextData, results_dir: Path) -> None:
        """Before any shard: a contrast set given explicitly exists and reads."""
        if options.contrast_set:  # asked for explicitly: a missing or malformed set is the user's to fix
            try:
                read_pairs(resolve_set(options.contrast_set, options.data_dir), options.contrast_split)
            except SkipEvaluator as exc:
                raise BenchError(str(exc)) from exc

    def evaluate(self, ctx: EvalContext) -> Evaluation:
        """Accuracy on originals and on contrast examples and pair consistency; per-pair predictions as the
        artefact."""
        name = self.source(ctx)
        pairs = read_pairs(resolve_set(name, ctx.options.data_dir), ctx.options.contrast_split)
        labels = sorted({row["label"] for pair in pairs for row in pair})
        unknown = [label for label in labels if label not in ctx.label_names]
        if unknown:
            raise SkipEvaluator(f"contrast set {name} has labels {unknown} that the model ({ctx.data.name}: "
                                f"{ctx.label_names}) does not predict; use a set with matching labels")
        index = {label: i for i, label in enumerate(ctx.label_names)}
        texts = [row["text"] for pair in pairs for row in pair]
        predicted = ctx.classifier.predict(texts).reshape(len(pairs), 2)
        gold = np.array([[index[o["label"]], index[c["label"]]] for o, c in pairs])
        right = predicted == gold
        names = ctx.label_names
        per_pair = [{"pair_id": o["pair_id"], "original_gold": o["label"], "original_predicted": names[p[0]],
                     "contrast_gold": c["label"], "contrast_predicted": names[p[1]]}
                    for (o, c), p in zip(pairs, predicted)]
        extra = {"contrast_set": Path(name).name, "label": ""}
        split = f"contrast-{ctx.options.contrast_split}"
        n = len(pairs)
        return Evaluation([
            {"split": split, "metric": "original_accuracy", "value": float(right[:, 0].mean()), "n": n, **extra},
            {"split": split, "metric": "contrast_accuracy", "value": float(right[:, 1].mean()), "n": n, **extra},
            {"split": split, "metric": "consistency", "value": float(right.all(1).mean()), "n": n, **extra},
        ], {store.CONTRAST_PREDICTIONS: per_pair})
