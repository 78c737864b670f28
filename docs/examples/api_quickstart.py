# %% [markdown]
# # clbench from Python
# Train two methods on the tiny data set that ships with the checkout, read the rows back and compare the
# methods with ce, as `clbench run` and `clbench report --table compare` would (docs/API.md). Tiny scale: a
# random 2-layer BERT, 45 training texts, 2 epochs, about a minute on a CPU; its numbers show the mechanics,
# not the methods. For a real comparison: datasets=["sst2"], encoder="minilm", seeds=[1, 2, 3], no epochs=, and
# data_dir= a folder holding sst2/ (train.jsonl, test.jsonl) where the Hugging Face Hub is out of reach.
# Run it as a script (python docs/examples/api_quickstart.py) or cell by cell (# %%) in an editor.

# %%
import sys
from pathlib import Path

import clbench

if not hasattr(clbench, "run"):  # a folder named clbench hides the installed module (docs/API.md)
    print(f"error: `import clbench` found the folder {', '.join(clbench.__path__)}, not clbench's module: a "
          "folder named clbench in the script's folder (or the current one) hides it; rename that folder or run "
          "from another one", file=sys.stderr)
    sys.exit(2)

TINY = Path(clbench.__file__).resolve().parent / "datasets" / "fixtures" / "tiny"  # in a checkout

# %% [markdown]
# `run` trains and evaluates every method x dataset x encoder x seed shard and returns the tidy rows: one per
# run x split x metric (x label), `value` a fraction as stored (0.8 = 80%). Keywords are `clbench run`'s options
# and settings; a rerun skips the finished shards and returns their stored rows.

# %%
rows = clbench.run(methods=["ce", "clld"], datasets=[str(TINY)], encoder="tiny-bert", seeds=[2],
                   results_dir="results-quickstart", evaluators="none",
                   epochs=2, lr=5e-3, batch_size=8, max_length=32)
test = rows.query("split == 'test' and label == '' and metric in ('accuracy', 'macro_f1')")
print((100 * test.pivot(index="method", columns="metric", values="value")).round(2).to_string())  # in %

# %% [markdown]
# `load_results` reads a results folder as `clbench report` does (`collapsed` on each row of a run);
# `compare` is the paired comparison of `clbench report --table compare`, as numbers. A random 2-layer BERT on 45
# texts often collapses (predicts one class: not a result), and reports leave such runs out; this tiny example
# keeps them (include_collapsed=True, its `collapsed` column says which) so that the mechanics always print. A run
# whose test accuracy is not clearly above chance makes the verdict "near chance" (`near_chance` True).

# %%
stored = clbench.load_results("results-quickstart")
print(f"{len(stored)} rows, {stored['run_key'].nunique()} runs in results-quickstart")
comparison = clbench.compare(stored, baseline="ce", bootstrap=1000, include_collapsed=True)
print(comparison[["method", "verdict", "delta", "ci_low", "ci_high", "runs", "items_ci_low", "items_ci_high",
                  "collapsed", "near_chance"]].round(3).to_string(index=False))

# %% [markdown]
# `table` gives any report table as the command prints it (here paper-ii: test accuracy in %, mean (seeds)).

# %%
print(clbench.table(stored, "paper-ii", include_collapsed=True).to_string())
