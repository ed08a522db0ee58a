#!/usr/bin/env bash
# Bring up a Docker engine on a Debian CI machine with no registry access, idempotently:
#   1. install Debian's docker.io and debootstrap if they are missing;
#   2. start dockerd in the background if nothing answers on the socket, and wait for it;
#   3. if the image debian:bookworm-slim (the `cpu` stack's base) is missing, build it with
#      debootstrap and `docker import`, since Docker Hub may be unreachable.
# Safe to run again: every step checks before it acts.
set -euo pipefail

SOCKET="${FP16DOCTOR_DOCKER_SOCKET:-/var/run/docker.sock}"
BASE_TAG="debian:bookworm-slim"
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

if ! docker -H "unix://$SOCKET" image inspect "$BASE_TAG" >/dev/null 2>&1; then
  say "building $BASE_TAG with debootstrap (no registry needed)"
  rootfs="$(mktemp -d /tmp/fp16doctor-rootfs.XXXXXX)"
  trap '$SUDO rm -rf "$rootfs"' EXIT
  $SUDO debootstrap --variant=minbase bookworm "$rootfs" ${MIRROR:+"$MIRROR"} >/dev/null
  # Same trims as the official slim image: no apt lists, no docs caches.
  $SUDO rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/archives/*.deb
  $SUDO tar -C "$rootfs" -c . | docker -H "unix://$SOCKET" import \
    --change 'CMD ["bash"]' --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    - "$BASE_TAG" >/dev/null
fi
say "$BASE_TAG present"
