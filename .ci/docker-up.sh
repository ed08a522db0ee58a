#!/usr/bin/env bash
# Bring up a Docker engine on a Debian CI machine with no registry access, idempotently:
#   1. install Debian's docker.io and debootstrap if they are missing;
#   2. start dockerd in the background if nothing answers on the socket, and wait for it;
#   3. for each Debian base the CPU stacks use (debian:bookworm-slim for `cpu`, debian:bullseye-slim for
#      `tf2.10-cpu`) that is missing, build it with debootstrap and `docker import`, since Docker Hub
#      may be unreachable. FP16DOCTOR_DEBIAN_SUITES names fewer or more suites.
# Safe to run again: every step checks before it acts.
set -euo pipefail

SOCKET="${FP16DOCTOR_DOCKER_SOCKET:-/var/run/docker.sock}"
SUITES="${FP16DOCTOR_DEBIAN_SUITES:-bookworm bullseye}"
# A mirror only when one is named; otherwise debootstrap uses its own default for the suite.
MIRROR="${FP16DOCTOR_DEBIAN_MIRROR:-}"
LOG="${FP16DOCTOR_DOCKERD_LOG:-/var/log/fp16doctor-dockerd.log}"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

say() { echo "docker-up: $*" >&2; }

missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
if [ "${#missing[@]}" -gt 0 ]; then
  say "installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

engine_up() { docker -H "unix://$SOCKET" version >/dev/null 2>&1; }

if ! engine_up; then
  say "starting dockerd on $SOCKET (log: $LOG)"
  # setsid + nohup: the daemon outlives this script and the CI step that ran it.
  $SUDO setsid nohup dockerd --host "unix://$SOCKET" >"$LOG" 2>&1 < /dev/null &
  for _ in $(seq 1 60); do
    engine_up && break
    sleep 1
  done
  if ! engine_up; then
    say "dockerd did not answer within 60 s; last lines of $LOG:"
    tail -n 30 "$LOG" >&2 || true
    exit 1
  fi
fi
say "engine up: $(docker -H "unix://$SOCKET" version --format '{{.Server.Version}}')"

build_base() {  # build_base SUITE: debian:SUITE-slim from debootstrap, unless it is already there
  local suite="$1" tag="debian:$1-slim" rootfs
  if docker -H "unix://$SOCKET" image inspect "$tag" >/dev/null 2>&1; then
    say "$tag present"
    return
  fi
  say "building $tag with debootstrap (no registry needed)"
  rootfs="$(mktemp -d /tmp/fp16doctor-rootfs.XXXXXX)"
  $SUDO debootstrap --variant=minbase "$suite" "$rootfs" ${MIRROR:+"$MIRROR"} >/dev/null
  # Same trims as the official slim image: no apt lists, no docs caches.
  $SUDO rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/archives/*.deb
  $SUDO tar -C "$rootfs" -c . | docker -H "unix://$SOCKET" import \
    --change 'CMD ["bash"]' --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    - "$tag" >/dev/null
  $SUDO rm -rf "$rootfs"
  say "$tag built"
}

for suite in $SUITES; do
  build_base "$suite"
done
