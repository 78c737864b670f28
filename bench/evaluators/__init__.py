"""Evaluators: each scores a trained classifier and returns tidy rows (see base.py). Importing this package
registers every built-in evaluator."""

from bench.evaluators import checklist, contrast, representation, textfooler  # noqa: F401
