"""The names of the files in a results folder and in each of its run folders (one place for each name)."""

ROWS = "rows.json"  # a run is finished exactly when this exists; written last
SPEC = "spec.json"
ERROR = "error.json"
TRAIN_LOG = "train_log.json"  # per-epoch history of a run
TABLE = "results.parquet"  # the gathered table, in the results folder
EVALS = "evals"  # evaluator rows of a run: evals/<evaluator>-<settings hash>.json
CHECKPOINT = "checkpoint.pt"  # resume state of an unfinished run (removed once its rows are written)
MODEL = "model.safetensors"  # the trained weights, for `clbench evaluate` and `clbench export`
LEGACY_MODEL = "model.pt"  # the same, as runs before safetensors stored them (a torch pickle; still read)
PREDICTIONS = "predictions.jsonl.gz"  # per-example test predictions (paired statistics)
CONFUSION = "confusion.json"  # validation and test confusion matrices
METHOD_STATE = "method_state.json"  # what a method reports about its training (e.g. CLLD's label distances)
TSNE = "tsne.json"  # evaluator artefacts, one file each:
CONTRAST_PREDICTIONS = "contrast_predictions.jsonl.gz"
CHECKLIST_CASES = "checklist_cases.jsonl.gz"
CHECKLIST_INFO = "checklist.json"
TRANSFER_PREDICTIONS = "transfer_textfooler.jsonl.gz"
ADVERSARIAL = "adversarial_textfooler.jsonl.gz"
ADVERSARIAL_SETTINGS = "adversarial_textfooler.json"
TRAINING_FILES = (ROWS, SPEC, PREDICTIONS, CONFUSION, TRAIN_LOG, METHOD_STATE)  # damaged: the run is retrained
