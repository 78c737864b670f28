"""The GPU campaign's parts and their steps. Each step is one command, given twice: at full scale (a lent H100,
the figures the README owes) and at toy scale (`--dry-run`: a CPU, tiny-bert, a 45-sentence fixture, a few steps,
one shard), so that the dry run walks the same code path as the real one. Placeholders in the arguments are filled
in by the runner: {data} (the part's data folder), {results} and {reports} (scratch folders), {vectors} (the
attack's word vectors), {prefix} (the part's file name prefix in the folder whose files come back)."""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.campaign import layout

PAPER_CONFIG = "configs/clld-table2-minilm.yaml"
PAPER_DATASETS = ("trec", "mr", "r8")
ATTACK_N = 500          # attacked examples per shard (the vectors of the pack are cut to these samples)
SHARDS_PER_GPU = 4      # paper shards sharing the GPU (MiniLM leaves most of an H100 idle)
PART_BUDGET_S = 540     # 9 minutes: a device command may run 10
TOY_DATASET = "datasets/fixtures/tiny"  # the dry run's data: 45 training and 30 test sentences


@dataclass(frozen=True)
class Step:
    """One command of a part: `program` is perf (python -m benchmarks), clbench (python -m bench) or pytest."""

    name: str
    program: str
    full: tuple[str, ...]
    toy: tuple[str, ...]
    reserve_s: int = 0   # seconds of the part's budget this step leaves to the steps after it


@dataclass(frozen=True)
class Part:
    """A part: its steps in order of value (a part stopped by its time budget keeps what it finished), the pack
    folders a device call must carry for it, and the dataset a paper part trains on."""

    name: str
    steps: tuple[Step, ...]
    carry: tuple[str, ...]
    dataset: str | None = None


TOY_PERF = ("--dataset", TOY_DATASET, "--encoder", "tiny-bert", "--max-length", "32", "--steps", "2", "--rounds", "1",
            "--quiet")
PERF_DATA = ("--data-dir", "{data}")

PERF = Part("perf", carry=(layout.BASE, layout.MINILM, layout.DATA_PERF), steps=(
    # not measured yet, so first (issue 43); with `--only graphs,graphs-short` they are one device call of about
    # 6 minutes, and `--only report,profile,compile,short-texts,shard-cost,shards` (about 6 minutes) the other
    Step("graphs", "perf",
         ("graphs", "--dataset", "20ng", *PERF_DATA, "--encoder", "bert-base-random", "--batch-sizes", "32,128",
          "--methods", "ce"),
         ("graphs", *TOY_PERF, "--batch-sizes", "4", "--methods", "ce")),
    Step("graphs-short", "perf",
         ("graphs", "--dataset", "trec", *PERF_DATA, "--encoder", "minilm", "--batch-sizes", "32",
          "--methods", "ce,clld-adaptive", "--shards", "1", "--epochs", "3", "--evaluators", "none"),
         ("graphs", *TOY_PERF, "--batch-sizes", "4", "--methods", "ce,clld-adaptive", "--shards", "1", "--epochs",
          "1", "--evaluators", "none")),
    Step("report", "perf",
         ("report", "--dataset", "20ng", *PERF_DATA, "--encoder", "bert-base-random", "--batch-sizes", "32,128"),
         ("report", *TOY_PERF, "--batch-sizes", "4,8")),
    Step("profile", "perf",
         ("profile", "--dataset", "20ng", *PERF_DATA, "--encoder", "bert-base-random", "--batch-size", "32",
          "--methods", "ce"),
         ("profile", *TOY_PERF, "--batch-size", "4")),
    Step("compile", "perf",
         ("compile", "--dataset", "20ng", *PERF_DATA, "--encoder", "bert-base-random", "--methods", "ce,clld-adaptive"),
         ("compile", *TOY_PERF, "--batch-size", "4", "--methods", "ce,clld-adaptive", "--compile-backend", "eager")),
    Step("short-texts", "perf",
         ("short-texts", "--datasets", "trec,mr", *PERF_DATA, "--encoder", "minilm", "--compile"),
         ("short-texts", *TOY_PERF, "--datasets", TOY_DATASET, "--batch-size", "4", "--compile",
          "--compile-backend", "eager")),
    Step("shard-cost", "perf",
         ("shard-cost", "--dataset", "trec", *PERF_DATA, "--encoder", "minilm", "--shards", "2"),
         ("shard-cost", "--dataset", TOY_DATASET, "--encoder", "tiny-bert", "--epochs", "1", "--max-length", "32",
          "--evaluators", "repr", "--shards", "2", "--quiet")),
    Step("shards", "perf",
         ("shards", "--dataset", "mr", *PERF_DATA, "--encoder", "minilm", "--concurrency", "1,2,4", "--rounds", "2"),
         ("shards", *TOY_PERF, "--batch-size", "4", "--concurrency", "1,2", "--epochs", "1")),
))


def paper_part(dataset: str) -> Part:
    """The CLLD Table II protocol with MiniLM on one dataset (3 methods x 3 seeds, several shards on the GPU at
    once), the contrast and TextFooler evaluators included, then the table against the paper."""
    results = ("--results-dir", "{results}")
    reports = (*results, "--reports-dir", "{reports}")
    carry = (layout.BASE, layout.MINILM, layout.WORDNET, layout.paper_folder(dataset))
    return Part(f"paper:{dataset}", dataset=dataset, carry=carry, steps=(
        Step("train", "clbench",
             ("run", "--config", PAPER_CONFIG, "--datasets", dataset, "--data-dir", "{data}", *results,
              "--evaluators", "contrast,textfooler", "--attack-n", str(ATTACK_N), "--word-vectors", "{vectors}",
              "--shards-per-gpu", str(SHARDS_PER_GPU), "--no-progress"),
             ("run", "--config", PAPER_CONFIG, "--datasets", TOY_DATASET, "--encoder", "tiny-bert", "--methods",
              "ce", "--seeds", "1", "--epochs", "10", "--lr", "2e-3", "--batch-size", "8", "--max-length", "32",
              *results, "--evaluators", "contrast,textfooler", "--attack-n", "4", "--word-vectors", "{vectors}",
              "--no-progress"), reserve_s=75),
        Step("status", "clbench", ("status", *results), ("status", *results)),
        Step("table", "clbench", ("report", "--table", "paper-ii", "--vs-paper", *reports),
             ("report", "--table", "paper-ii", *reports)),  # a toy set has no published numbers
        Step("robustness", "clbench", ("report", "--table", "robustness", *reports),
             ("report", "--table", "robustness", *reports)),
        Step("export", "clbench", ("results", *results, "--export", "csv", "--output", "{prefix}-rows.csv"),
             ("results", *results, "--export", "csv", "--output", "{prefix}-rows.csv")),
    ))


TESTS = Part("tests", carry=(layout.BASE, layout.TEST_WHEELS, layout.MINILM), steps=(
    Step("pytest", "pytest", ("-p", "no:cacheprovider", "-n", "8", "--junitxml", "{prefix}-junit.xml", "-q"),
         ("tests/test_spec.py", "tests/test_registry.py", "-p", "no:cacheprovider", "--junitxml",
          "{prefix}-junit.xml", "-q")),
))

PARTS: dict[str, Part] = {part.name: part for part in (PERF, *(paper_part(d) for d in PAPER_DATASETS), TESTS)}


def get_part(name: str) -> Part:
    """The part called `name`; KeyError names the known parts."""
    if name not in PARTS:
        raise KeyError(f"unknown part {name!r}; the parts are {', '.join(PARTS)}")
    return PARTS[name]
