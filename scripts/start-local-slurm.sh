#!/usr/bin/env bash
# Start a one-node SLURM cluster on this machine, for trying `clbench run --executor slurm` and for the tests
# marked `slurm` (tests/test_slurm_cluster.py). Debian/Ubuntu packages: munge, MariaDB, slurmdbd (accounting,
# so that `sacct` and `clbench status` work), slurmctld and slurmd, all as root. Idempotent; ~2-3 minutes the
# first time (apt), seconds after. Node size is read from the machine (nproc, memory). Stop it with
# scripts/stop-local-slurm.sh. Adapted from a verified recipe for SLURM 22.05 (Debian bookworm).
#
# Differences from a production cluster, chosen so that tests and try-outs do not wait on timers:
#   KillWait=5                      SIGTERM -> SIGKILL after 5 s (default 30) when a task is cancelled/requeued
#   SchedulerParameters=sched_interval=5,bf_interval=5
#                                   the scheduler looks at pending jobs every 5 s (defaults 60 s and 30 s)
# A requeued job still waits SLURM's own ~2 minutes before it may start again (its BeginTime).
set -euo pipefail
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "start-local-slurm: run as root (no sudo here)" >&2; exit 2; }
  exec sudo -E bash "$0" "$@"
fi
export DEBIAN_FRONTEND=noninteractive
need=""; for b in slurmctld slurmd slurmdbd munged mysqld sbatch; do command -v $b >/dev/null || need=1; done
if [ -n "$need" ]; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends slurmctld slurmd slurmdbd slurm-client munge mariadb-server \
    >/dev/null
fi
H=$(hostname -s); CPUS=$(nproc); MEM=$(( $(awk '/MemTotal/{print $2}' /proc/meminfo) / 1024 - 2048 ))
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge /run/mysqld
[ -s /etc/munge/munge.key ] || dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
chown munge:munge /etc/munge/munge.key /run/munge; chmod 400 /etc/munge/munge.key; chown mysql:mysql /run/mysqld
pgrep -x munged >/dev/null || su -s /bin/sh munge -c /usr/sbin/munged
if ! mysqladmin ping >/dev/null 2>&1; then
  (mysqld_safe --user=mysql >/var/log/slurm/mysqld.log 2>&1 &)
  for _ in $(seq 60); do mysqladmin ping >/dev/null 2>&1 && break; sleep 1; done
fi
mysql -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurm';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"
cat > /etc/slurm/slurmdbd.conf <<CONF
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=slurm
StorageLoc=slurm_acct_db
LogFile=/var/log/slurm/slurmdbd.log
PidFile=/run/slurmdbd.pid
CONF
chmod 600 /etc/slurm/slurmdbd.conf
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=local
SlurmctldHost=$H
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=5,bf_interval=5
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
KillWait=5
ReturnToService=2
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
JobAcctGatherType=jobacct_gather/linux
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
JobCompType=jobcomp/none
MpiDefault=none
NodeName=$H CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
pgrep -x slurmdbd >/dev/null || { /usr/sbin/slurmdbd; sleep 3; }
sacctmgr -i add cluster local >/dev/null 2>&1 || true
if pgrep -x slurmctld >/dev/null; then scontrol reconfigure; else /usr/sbin/slurmctld; fi
pgrep -x slurmd >/dev/null || /usr/sbin/slurmd
for _ in $(seq 60); do sinfo -h -o %T 2>/dev/null | grep -qE 'idle|mix|alloc' && break; sleep 1; done
# a node left down or drained by an earlier run (e.g. a killed slurmd) is brought back
scontrol update NodeName="$H" State=RESUME >/dev/null 2>&1 || true
sinfo -h -o %T | grep -qE 'idle|mix|alloc' || { echo "start-local-slurm: the node did not come up" >&2; exit 1; }
sinfo
