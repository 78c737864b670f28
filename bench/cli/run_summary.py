"""What `clbench run` prints when its shards have ended: the results table (accuracy and macro-F1 per method, the
paired difference to ce), one line per evaluator, the collapsed runs (left out of both, marked "collapsed — not a
result"), where the results (and, for the demo, the reports) are, and the commands that come next; and a copy of
all that for a finished sweep to say again (`capturing`)."""

from __future__ import annotations

import contextlib
import io
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.results.store import DEFAULT_RESULTS
from bench.running.options import RunOptions


def print_results(rows: list[dict[str, Any]], evaluation_rows: list[dict[str, Any]], results_dir: Path) -> None:
    """The results table on stdout (with the classical reference's floor line and its note), then one line per
    evaluator."""
    from bench.errors import BenchError
    from bench.reporting import stats
    from bench.reporting.summary import BASELINE, evaluator_lines, results_table, table_text

    predictions = None
    if any(r["method"] == BASELINE for r in rows):  # the paired Δ needs every run's test predictions
        try:
            predictions = stats.load_run_predictions(results_dir, sorted({r["run_key"] for r in rows}))
        except BenchError as exc:
            print(f"clbench: no paired differences: {exc}", file=sys.stderr)
    print(table_text(results_table(rows + evaluation_rows, predictions)))  # the reference's rows: its floor line
    lines = evaluator_lines(rows + evaluation_rows)  # the clean rows say which runs collapsed
    if lines:
        print()
        for line in lines:
            print(line)


def collapsed_warning(rows: list[dict[str, Any]]) -> str | None:
    """A warning line naming the runs among `rows` flagged collapsed (`bench.reporting.collapsed`), else None."""
    import pandas as pd

    from bench.reporting.collapsed import collapsed_keys

    from bench.encoders.learning_rates import lr_hint

    keys = collapsed_keys(pd.DataFrame(rows))
    if not keys:
        return None
    encoders = sorted({r["encoder"] for r in rows if r.get("run_key") in keys and r.get("encoder")})
    hint = lr_hint(encoders[0]) if len(encoders) == 1 else "try another --lr or more --epochs"
    return (f"warning: {len(keys)} shard(s) collapsed (one class predicted for every test example; not a result, "
            f"left out of the means above -- {hint}): {', '.join(keys)}")


def near_chance_warning(rows: list[dict[str, Any]]) -> str | None:
    """A warning line naming the runs among `rows` not clearly above chance (`bench.results.chance`; collapsed
    runs are named by `collapsed_warning`), else None."""
    import pandas as pd

    from bench.reporting import nearchance
    from bench.reporting.collapsed import collapsed_keys

    frame = nearchance.fill(pd.DataFrame(rows))
    collapsed = set(collapsed_keys(frame))
    keys = [k for k in nearchance.keys(frame) if k not in collapsed]
    if not keys:
        return None
    return (f"warning: {len(keys)} shard(s) near chance ({nearchance.WHAT}; marked {nearchance.MARK}, never "
            f"ranked best or given a verdict): {', '.join(keys)}")


def write_demo_reports(rows: list[dict[str, Any]], results_dir: Path, reports_dir: Path) -> list[Path]:
    """The demo's Markdown table and figures under `reports_dir` (printed on stderr); [] when they cannot be
    drawn (the reason on stderr)."""
    from bench.errors import BenchError
    from bench.reporting.sweep_reports import write_sweep_reports

    try:
        written = write_sweep_reports(results_dir, rows, reports_dir)
    except (BenchError, OSError) as exc:
        print(f"clbench: no reports written: {exc}", file=sys.stderr)
        return []
    print(f"clbench: reports: {', '.join(str(p) for p in written)}", file=sys.stderr)
    return written


def next_steps(opts: RunOptions, keys: list[str], collapsed: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """The commands worth running next on these results, each with what it gives; only those that will work
    (`collapsed`: the runs among `keys` that collapsed, which the reports leave out)."""
    default = Path(opts.results_dir).resolve() == Path(DEFAULT_RESULTS).resolve()  # ./results
    folder = "" if default else f" --results-dir {opts.results_dir}"
    select = " --select-by validation" if opts.grid else ""  # a grid: one combination per method, chosen
    steps = [f"clbench results{folder}                      every result row (filter, export CSV/Parquet)"]
    results = [k for k in keys if k not in collapsed]
    if not results:  # every run collapsed: the reports would have nothing to show
        steps[0] = f"clbench results{folder} --filter collapsed=0,1   the rows of the collapsed runs"
        steps.append(f"clbench plot confusion {keys[0]}{folder}   what the collapsed model predicts")
        return steps
    if any(k.split("_", 1)[0] == "ce" for k in results) and any(k.split("_", 1)[0] != "ce" for k in results):
        steps.append(f"clbench report{folder} --table compare{select}       verdicts vs ce over paired runs")
    steps.append(f"clbench report{folder} --html                one self-contained page to share")
    request = getattr(opts, "request", None)
    if opts.grid and request is not None and not request.evaluators:
        steps.append(f"clbench evaluate --selected{folder}   robustness evaluators on each chosen combination")
    if len(opts.regimes) > 1:
        steps.append(f"clbench plot curve{folder}{select}   test accuracy against the data regime")
    clld = next((k for k in results if k.startswith("clld")), None)
    if clld:
        steps.append(f"clbench plot ldm {clld}{folder}   the learnt label distances")
    steps.append(f"clbench plot confusion {results[0]}{folder}   a test confusion heatmap")
    return steps


def print_next_steps(opts: RunOptions, keys: list[str], collapsed: set[str] | frozenset[str] = frozenset()) -> None:
    """Where the results are and the next commands, on stderr (stdout keeps the tables)."""
    print(f"clbench: results in {opts.results_dir} ({len(keys)} run(s)); next:", file=sys.stderr)
    for step in next_steps(opts, keys, collapsed):
        print(f"  {step}", file=sys.stderr)


class Said:
    """What a block printed on stdout and stderr (`capturing`), and whether that is all it said: nothing went
    through a logging handler, whose own stream this does not see."""

    def __init__(self) -> None:
        self.stdout, self.stderr = io.StringIO(), io.StringIO()
        self.logged = 0


class Tee(io.TextIOBase):
    """A text stream that writes to `stream` and keeps a copy in `copy`."""

    def __init__(self, stream: Any, copy: io.StringIO) -> None:
        self.stream, self.copy = stream, copy

    def write(self, text: str) -> int:
        self.copy.write(text)
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.stream, "encoding", "utf-8")


@contextlib.contextmanager
def capturing(echo: bool = True) -> Iterator[Said]:
    """Print as usual (`echo`; else print nothing) and keep a copy of what is printed (a finished sweep's answer,
    remembered with it: bench.running.sweepmemo); log records are counted, not copied."""
    said = Said()

    class Counter(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.logged += 1

    counter = Counter()
    logging.getLogger().addHandler(counter)
    logging.getLogger("bench").addHandler(counter)
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout = Tee(stdout if echo else io.StringIO(), said.stdout)
    sys.stderr = Tee(stderr if echo else io.StringIO(), said.stderr)
    try:
        yield said
    finally:
        sys.stdout, sys.stderr = stdout, stderr
        logging.getLogger().removeHandler(counter)
        logging.getLogger("bench").removeHandler(counter)


def shard_lines(i: int, n: int, outcome: Any, eta: str = "") -> list[str]:
    """The lines said when shard `i` of `n` ends: its status, key and test accuracy (or why not), then any damage
    repaired and a warning for a suspect (collapsed) result."""
    from bench.encoders.learning_rates import lr_hint
    from bench.results.store import is_collapsed_flag

    accuracy = next((r["value"] for r in outcome.rows if r["metric"] == "accuracy" and r["split"] == "test"), None)
    detail = f"test accuracy {100 * accuracy:.2f}%" if accuracy is not None else outcome.message
    lines = [f"[{i}/{n}] {outcome.status:7s} {outcome.key}  {detail}"
             + (f"  ({outcome.seconds:.0f}s)" if outcome.status == "done" else "") + (f"  {eta}" if eta else "")]
    lines += [f"repaired: {note}" for note in outcome.repaired]  # damaged files moved aside (bench.results.repair)
    if outcome.status == "done" and outcome.message:  # a finished run whose result is suspect (collapsed)
        lines.append(f"warning: {outcome.key} {outcome.message}")
    elif outcome.status == "skipped" and any(is_collapsed_flag(r.get("collapsed")) for r in outcome.rows):
        hint = lr_hint(str(outcome.rows[0].get("encoder", ""))).replace("try ", "retrain it with --overwrite and ")
        lines.append(f"warning: {outcome.key} collapsed when it was trained (the model predicts one class "
                     f"whatever the input): not a result; {hint}")
    return lines
