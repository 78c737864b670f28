"""Evaluators: each scores a trained classifier and returns tidy rows (see base.py). Importing this package
imports every module in it that registers evaluators (its source names `EVALUATORS.`), then the evaluators of installed plugins (entry-point
group `clbench.evaluators`)."""

from bench.registry import import_members, load_plugins

import_members(__name__, __path__, "EVALUATORS")
load_plugins("evaluator")
