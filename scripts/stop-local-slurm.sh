#!/usr/bin/env bash
# Stop the one-node cluster of scripts/start-local-slurm.sh (its state and accounting database are kept).
set -uo pipefail
if [ "$(id -u)" != 0 ]; then exec sudo -E bash "$0" "$@"; fi
scontrol shutdown >/dev/null 2>&1
pkill -x slurmd; pkill -x slurmdbd
mysqladmin shutdown >/dev/null 2>&1
pkill -x munged
echo "stopped"
