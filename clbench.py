"""clbench's Python API under the distribution's own name: `import clbench; clbench.run(...)` (docs/API.md). The
code lives in `bench.api`; the rest of the package is `bench`."""

from bench.api import (BenchError, compare, list_datasets, list_encoders, list_evaluators, list_methods,
                       load_results, run, table)

__all__ = ["BenchError", "compare", "list_datasets", "list_encoders", "list_evaluators", "list_methods",
           "load_results", "run", "table"]
