#!/usr/bin/env bash
# The GPU campaign (docs/GPU-CAMPAIGN.md): every GPU figure the suite owes, one device call per part.
#   bash scripts/gpu-campaign.sh pack .campaign                          # here: the folders to carry + each call
#   bash scripts/gpu-campaign.sh run PART --pack .campaign --out "$OUT"  # on the device machine
#   bash scripts/gpu-campaign.sh run PART --dry-run --out OUT            # anywhere: the same steps at toy scale
#   bash scripts/gpu-campaign.sh report OUT...                           # the README's GPU tables
# On the device (run without --dry-run) the carried wheels are installed into a scratch site first, and Python
# is told not to import from the working directory, so that the installed clbench is the one that runs (the
# campaign itself, benchmarks/, is not installed: it is read from the checkout, placed after the site).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ "${1:-}" = run ]; then
  pack="" dry=0 tests=0 previous=""
  for arg in "$@"; do
    if [ "$previous" = --pack ]; then pack=$arg; fi
    case $arg in --dry-run) dry=1 ;; --pack=*) pack=${arg#--pack=} ;; tests) tests=1 ;; esac
    previous=$arg
  done
  if [ "$dry" = 0 ] && [ -n "$pack" ]; then
    shopt -s nullglob
    wheels=("$pack"/base/*.whl)
    if [ "$tests" = 1 ]; then wheels+=("$pack"/test-wheels/*.whl); fi
    if [ ${#wheels[@]} = 0 ]; then
      echo "gpu-campaign.sh: error: no wheels in $pack/base; carry it (bash scripts/gpu-campaign.sh pack $pack makes it)" >&2
      exit 2
    fi
    site=${CLBENCH_SITE:-/tmp/clbench-site}
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "${wheels[@]}"
    # the checkout after the site: benchmarks/ (never installed) is read from it, clbench from the site
    export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONSAFEPATH=1 PATH="$site/bin:$PATH"
  fi
fi
exec "$PYTHON" -m benchmarks.campaign "$@"
