#!/usr/bin/env bash
# Bring up a one-node Slurm cluster on this machine (Debian's slurm-wlm + munge), idempotently:
#   1. install slurm-wlm and munge if they are missing;
#   2. write /etc/slurm/slurm.conf and gres.conf for this host (no accounting, proctrack/linuxproc,
#      task/none: no cgroups needed), with two typed GPUs (gpu:ci:2) on placeholder character devices
#      (mknod c 1 3, /dev/null's numbers) so `--gres gpu:ci:1` schedules as on a real cluster;
#   3. start munged, slurmctld and slurmd if they are not running, and wait for the node to be idle.
# Safe to run again: every step checks before it acts; it prints what it started.
# FP16DOCTOR_SLURM_CONF_DIR (default /etc/slurm) names where the configuration goes.
set -euo pipefail

CONF_DIR="${FP16DOCTOR_SLURM_CONF_DIR:-/etc/slurm}"
STATE_DIR="${FP16DOCTOR_SLURM_STATE_DIR:-/var/spool/fp16doctor-slurm}"
LOG_DIR="${FP16DOCTOR_SLURM_LOG_DIR:-/var/log/fp16doctor-slurm}"
NODE="$(hostname -s)"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

say() { echo "slurm-up: $*" >&2; }

missing=()
command -v slurmctld >/dev/null 2>&1 || missing+=(slurm-wlm)
command -v munged >/dev/null 2>&1 || missing+=(munge)
if [ "${#missing[@]}" -gt 0 ]; then
  say "installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- munge: the key the package made, else a fresh one
if [ ! -s /etc/munge/munge.key ]; then
  say "creating /etc/munge/munge.key"
  $SUDO mkdir -p /etc/munge
  $SUDO dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
  $SUDO chown munge:munge /etc/munge/munge.key 2>/dev/null || true
  $SUDO chmod 400 /etc/munge/munge.key
fi
$SUDO mkdir -p /run/munge /var/log/munge /var/lib/munge
$SUDO chown munge:munge /run/munge /var/log/munge /var/lib/munge 2>/dev/null || true
if ! munge -n </dev/null >/dev/null 2>&1; then
  say "starting munged"
  if id munge >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    runuser -u munge -- munged --force
  else
    $SUDO munged --force
  fi
  for _ in $(seq 1 20); do munge -n </dev/null >/dev/null 2>&1 && break; sleep 0.5; done
fi
munge -n </dev/null | unmunge >/dev/null || { say "munge does not work"; exit 1; }

# --- configuration
CPUS="$(nproc)"
MEM_MIB="$(awk '/MemTotal/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)"
$SUDO mkdir -p "$CONF_DIR" "$STATE_DIR/ctld" "$STATE_DIR/d" "$LOG_DIR"
for i in 0 1; do
  dev="/dev/fp16doctor-ci-gpu$i"
  [ -e "$dev" ] || { $SUDO mknod "$dev" c 1 3; $SUDO chmod 666 "$dev"; say "made placeholder GPU device $dev"; }
done
conf="$(cat <<EOF
# Written by fp16doctor's .ci/slurm-up.sh: a one-node cluster for the integration tests.
ClusterName=fp16doctor-ci
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$STATE_DIR/ctld
SlurmdSpoolDir=$STATE_DIR/d
SlurmctldPidFile=$STATE_DIR/slurmctld.pid
SlurmdPidFile=$STATE_DIR/slurmd.pid
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MinJobAge=300
KillWait=5
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
MpiDefault=none
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MIB Gres=gpu:ci:2 State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
)"
gres="NodeName=$NODE Name=gpu Type=ci File=/dev/fp16doctor-ci-gpu[0-1]"
changed=0
if [ "$(cat "$CONF_DIR/slurm.conf" 2>/dev/null)" != "$conf" ]; then
  printf '%s\n' "$conf" | $SUDO tee "$CONF_DIR/slurm.conf" >/dev/null; changed=1
  say "wrote $CONF_DIR/slurm.conf"
fi
if [ "$(cat "$CONF_DIR/gres.conf" 2>/dev/null)" != "$gres" ]; then
  printf '%s\n' "$gres" | $SUDO tee "$CONF_DIR/gres.conf" >/dev/null; changed=1
  say "wrote $CONF_DIR/gres.conf"
fi
export SLURM_CONF="$CONF_DIR/slurm.conf"

running() { pgrep -x "$1" >/dev/null 2>&1; }
if [ "$changed" = 1 ] && running slurmctld; then
  say "configuration changed: restarting slurmctld and slurmd"
  $SUDO pkill -x slurmd || true
  $SUDO pkill -x slurmctld || true
  sleep 1
fi
if ! running slurmctld; then
  say "starting slurmctld (log: $LOG_DIR/slurmctld.log)"
  $SUDO slurmctld -f "$CONF_DIR/slurm.conf"
fi
for _ in $(seq 1 30); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.5; done
if ! running slurmd; then
  say "starting slurmd on $NODE (log: $LOG_DIR/slurmd.log)"
  $SUDO slurmd -f "$CONF_DIR/slurm.conf"
fi

# The node comes up idle; one left down or drained by an earlier run is resumed.
for _ in $(seq 1 60); do
  state="$(sinfo -h -n "$NODE" -o '%t' 2>/dev/null | head -n1)"
  case "$state" in
    idle|mix|alloc) break ;;
    down*|drain*|drng*) $SUDO scontrol update NodeName="$NODE" State=RESUME >/dev/null 2>&1 || true ;;
  esac
  sleep 0.5
done
state="$(sinfo -h -n "$NODE" -o '%t' 2>/dev/null | head -n1)"
case "$state" in
  idle|mix|alloc) ;;
  *) say "node $NODE is '$state', not idle; last lines of $LOG_DIR/slurmd.log:"
     tail -n 20 "$LOG_DIR/slurmd.log" >&2 || true
     exit 1 ;;
esac
say "cluster up: node $NODE ($CPUS CPUs, gres gpu:ci:2), partition debug, state $state"
