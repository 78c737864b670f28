"""Contrast sets (Gardner et al. 2020): accuracy on originals, on contrast examples, and pair consistency.

A contrast set is rows `id, text, label, pair_id, kind`: the rows of one `pair_id` are a group of one original
text and one or more edited texts (`kind` says which, see bench.evaluators.contrast_kinds: `original` /
`contrast` as in `imdb_contrast`, `counterfactual`, `revised`, ... as in counterfactually-augmented data, or
what `--contrast-kinds` maps). Metrics, with G groups and E >= G edited texts:

- `original_accuracy`: accuracy on the originals, each counted once (n = G);
- `contrast_accuracy`: accuracy on all edited texts (n = E);
- `consistency`: groups whose original and every edited text are right (n = G). This is Gardner et al.'s
  "contrast consistency" (a contrast set counts only when the model is right on all of it, the original
  included), and a group of five edits is one local decision boundary, not five: counting it per pair would
  let a set with many edits per original outweigh the others and hide a model that gets most but not all edits
  of a text right;
- `pair_consistency`: (original, edited) pairs both right (n = E), the per-pair reading; reported only when some
  original has more than one edited text (otherwise it equals `consistency`, and sets of plain pairs keep the
  rows they always had).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from bench.results import store
from bench.data.files import find_split_file, numbered_json_lines, read_rows
from bench.data.loading import TextData, find_named
from bench.errors import BenchError, SkipEvaluator
from bench.evaluators.base import EvalContext, EvalOptions, Evaluation, Evaluator
from bench.evaluators.contrast_kinds import ORIGINAL, canonical_kinds, kind_map, normal_kind, unknown_kind
from bench.registry import DATASETS, EVALUATORS

FIELDS = ("id", "text", "label", "pair_id", "kind")
Group = tuple[dict[str, Any], list[dict[str, Any]]]  # (original row, its edited rows in file order)


def default_contrast_set(dataset: str) -> str:
    """The contrast set a dataset's card names (e.g. `imdb_contrast` for sentiment sets), or ''."""
    card = DATASETS.get(dataset) if dataset in DATASETS else None
    return str(((card.evaluation if card else None) or {}).get("contrast_set") or "")


def contrast_source(options: EvalOptions, data_name: str) -> str:
    """The contrast set an evaluation of data `data_name` uses: --contrast-set, else the card's default, or ''."""
    return options.contrast_set or default_contrast_set(data_name)


def resolve_set(name_or_path: str, data_dir: str) -> Path:
    """A contrast-set folder or file from a path or a name looked up under the data folders."""
    path = find_named(name_or_path, data_dir or None)
    if path is not None:
        return path
    raise SkipEvaluator(f"contrast set {name_or_path!r} not found (give --contrast-set PATH or --data-dir "
                        "with that folder)")


def located_rows(file: Path) -> list[tuple[str, dict[str, Any]]]:
    """(where, row) for each row of a contrast file: `line N` of a JSON Lines file, `row N` of a CSV/TSV one."""
    if file.name.lower().endswith((".csv", ".tsv")):
        return [(f"row {number}", row) for number, row in enumerate(read_rows(file), start=1)]
    located = []
    for line, row in numbered_json_lines(file):
        if not isinstance(row, dict):
            raise BenchError(f"line {line} of {file} is not a JSON object; "
                             'each line must look like {"text": ..., "label": ...}')
        located.append((f"line {line}", row))
    return located


def read_groups(path: Path, split: str, kinds: str = "") -> list[Group]:
    """(original, [edited, ...]) row groups by `pair_id` (sorted by it) from a folder (its `split` file) or a
    single file, checked; `kinds` is a `--contrast-kinds` value. One-line errors: a missing field, an unknown
    kind, two originals in a group, a group without an original or without an edited text, an empty set."""
    file = find_split_file(path, split) if path.is_dir() else path
    if file is None:
        raise BenchError(f"contrast set {path} has no {split} file ({split}.jsonl[.gz]); pick another "
                         "--contrast-split")
    mapping = kind_map(kinds)
    originals: dict[str, dict[str, Any]] = {}
    edited: dict[str, list[dict[str, Any]]] = defaultdict(list)
    order: dict[str, None] = {}  # pair ids in file order
    for number, (where, row) in enumerate(located_rows(file), start=1):
        missing = [f for f in FIELDS if f not in row]
        if missing:
            raise BenchError(f"row {number} of {file} lacks {', '.join(missing)}; contrast rows need "
                             f"{', '.join(FIELDS)}")
        role = mapping.get(normal_kind(row["kind"]))
        if role is None:
            raise unknown_kind(row["kind"], f"{where} of {file}", mapping)
        pair = str(row["pair_id"])
        order.setdefault(pair)
        if role == ORIGINAL:
            if pair in originals:
                raise BenchError(f"row {number} of {file}: pair {row['pair_id']!r} has two original rows")
            originals[pair] = row
        else:
            edited[pair].append(row)
    incomplete = [p for p in order if p not in originals or p not in edited]
    if incomplete:
        raise BenchError(f"{file}: {len(incomplete)} pair(s) lack an original or a contrast row "
                         f"(first: {incomplete[0]!r})")
    if not order:
        raise BenchError(f"contrast set {file} is empty")
    return [(originals[p], edited[p]) for p in sorted(order)]


def read_pairs(path: Path, split: str, kinds: str = "") -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(original, edited) row pairs, one per edited text (an original with several edited texts is in several
    pairs), checked as `read_groups` does."""
    return [(original, row) for original, rows in read_groups(path, split, kinds) for row in rows]


def score_groups(right: np.ndarray, sizes: list[int]) -> dict[str, tuple[float, int]]:
    """Metric -> (value, n) from `right` (one bool per text, each group's original then its edited texts) and
    the number of edited texts per group (see the module's docstring for the definitions)."""
    starts = np.cumsum([0] + [1 + size for size in sizes])[:-1]
    original = right[starts]
    is_edited = np.ones(len(right), dtype=bool)
    is_edited[starts] = False
    edited = right[is_edited]
    owner_right = np.repeat(original, sizes)  # each edited text's original, right or not
    consistent = np.array([right[start:start + 1 + size].all() for start, size in zip(starts, sizes)])
    metrics = {"original_accuracy": (float(original.mean()), len(sizes)),
               "contrast_accuracy": (float(edited.mean()), len(edited)),
               "consistency": (float(consistent.mean()), len(sizes))}
    if max(sizes) > 1:
        metrics["pair_consistency"] = (float((owner_right & edited).mean()), len(edited))
    return metrics


@EVALUATORS.register("contrast")
class ContrastSets(Evaluator):
    """Contrast sets: accuracy on originals and on contrast examples, and contrast consistency."""

    name = "contrast"
    option_names = ("contrast_set", "contrast_split", "contrast_kinds")

    def source(self, ctx: EvalContext) -> str:
        """The contrast set to use: --contrast-set, else the dataset card's default."""
        return contrast_source(ctx.options, ctx.data.name)

    def skip_inputs(self, options: EvalOptions, data_name: str, explicit: bool, device_type: str) -> dict[str, Any]:
        """Base inputs, whether a contrast set is named (given or by the card), whether it is found, and the
        size and modification time of its split file (a set whose labels the model does not predict is skipped
        in `evaluate`)."""
        out = super().skip_inputs(options, data_name, explicit, device_type)
        name = contrast_source(options, data_name)
        out["contrast_set"] = bool(name)
        if name:
            path = find_named(name, options.data_dir or None)
            out["found"] = path is not None
            file = (find_split_file(path, options.contrast_split) if path.is_dir() else path) if path else None
            if file is not None:
                stat = file.stat()
                out["file"] = [stat.st_size, stat.st_mtime_ns]
        return out

    def settings(self, options: EvalOptions) -> dict[str, Any]:
        """Base settings; `contrast_kinds` only as what it changes in the default mapping, and only when it
        changes something (so the default settings, and their hash, are those from before the option)."""
        out = super().settings(options)
        try:
            kinds = canonical_kinds(options.contrast_kinds)
        except BenchError:
            kinds = options.contrast_kinds  # reported by the option check / check() / evaluate()
        if kinds:
            out["contrast_kinds"] = kinds
        else:
            out.pop("contrast_kinds", None)
        return out

    def skip_reason(self, ctx: EvalContext) -> str | None:
        """Why not: the dataset's card names no contrast set and none was given."""
        if not self.source(ctx):
            return (f"no contrast set for dataset {ctx.data.name!r} (its card names none; give --contrast-set "
                    "PATH to a folder of id/text/label/pair_id/kind rows)")
        return None

    def check(self, options: EvalOptions, data: TextData, results_dir: Path) -> None:
        """Before any shard: a contrast set given explicitly exists and reads."""
        kind_map(options.contrast_kinds)  # a malformed --contrast-kinds is an error even with the card's set
        if options.contrast_set:  # asked for explicitly: a missing or malformed set is the user's to fix
            try:
                read_groups(resolve_set(options.contrast_set, options.data_dir), options.contrast_split,
                            options.contrast_kinds)
            except SkipEvaluator as exc:
                raise BenchError(str(exc)) from exc

    def evaluate(self, ctx: EvalContext) -> Evaluation:
        """Accuracy on originals and on edited texts, group (and pair) consistency; one record per (original,
        edited) pair as the artefact."""
        name = self.source(ctx)
        groups = read_groups(resolve_set(name, ctx.options.data_dir), ctx.options.contrast_split,
                             ctx.options.contrast_kinds)
        rows = [row for original, edited in groups for row in (original, *edited)]
        labels = sorted({row["label"] for row in rows})
        unknown = [label for label in labels if label not in ctx.label_names]
        if unknown:
            raise SkipEvaluator(f"contrast set {name} has labels {unknown} that the model ({ctx.data.name}: "
                                f"{ctx.label_names}) does not predict; use a set with matching labels")
        index = {label: i for i, label in enumerate(ctx.label_names)}
        predicted = ctx.classifier.predict(ctx.fit([row["text"] for row in rows]))  # what the model sees
        right = predicted == np.array([index[row["label"]] for row in rows])
        names = ctx.label_names
        per_pair, at = [], 0
        for original, edited in groups:
            for offset, row in enumerate(edited, start=1):
                per_pair.append({"pair_id": original["pair_id"], "original_gold": original["label"],
                                 "original_predicted": names[predicted[at]], "contrast_gold": row["label"],
                                 "contrast_predicted": names[predicted[at + offset]]})
            at += 1 + len(edited)
        extra = {"contrast_set": Path(name).name, "label": ""}
        split = f"contrast-{ctx.options.contrast_split}"
        metrics = score_groups(right, [len(edited) for _, edited in groups])
        return Evaluation([{"split": split, "metric": metric, "value": value, "n": n, **extra}
                           for metric, (value, n) in metrics.items()], {store.CONTRAST_PREDICTIONS: per_pair})
