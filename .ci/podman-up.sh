#!/usr/bin/env bash
# Rootful podman for the `--runtime podman` Slurm tests, idempotently:
#   1. install Debian's podman if it is missing;
#   2. write /etc/containers/containers.conf with ulimits this machine allows. Rootful podman 4.3 gives a
#      container nofile=1048576 and a large nproc, and runc's setrlimit fails ("error setting rlimit type 7:
#      operation not permitted") where the machine's hard limits are lower and root lacks CAP_SYS_RESOURCE
#      (this VM: nofile 20000). The other defaults work here as they are: overlay storage, cgroupfs (no
#      systemd), events to a file (no journald).
# Safe to run again: it writes the file only when it differs, and prints what it did.
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
say() { echo "podman-up: $*" >&2; }

if ! command -v podman >/dev/null 2>&1; then
  say "installing podman"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends podman >/dev/null
fi

CONF="${FP16DOCTOR_CONTAINERS_CONF:-/etc/containers/containers.conf}"
nofile="$(ulimit -Hn)"
[ "$nofile" = unlimited ] && nofile=1048576
conf="$(cat <<EOC
# Written by fp16doctor's .ci/podman-up.sh: limits within this machine's hard limits (see the script).
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=32768:32768"]
EOC
)"
if [ "$(cat "$CONF" 2>/dev/null)" != "$conf" ]; then
  $SUDO mkdir -p "$(dirname "$CONF")"
  printf '%s\n' "$conf" | $SUDO tee "$CONF" >/dev/null
  say "wrote $CONF"
fi
say "podman $(podman version --format '{{.Client.Version}}'), storage $(podman info --format '{{.Store.GraphDriverName}}'), cgroups $(podman info --format '{{.Host.CgroupManager}}')"
