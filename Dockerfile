# One Dockerfile for every fp16doctor stack. The build args come from fp16doctor/stacks/stacks.toml
# (compose/stacks.yaml and `fp16doctor stacks build` set them). Build context: the repository root,
# or the same layout assembled in memory by fp16doctor (so remote engines work):
#   Dockerfile
#   compose/requirements/<STACK>.txt    every pip package installed on top of BASE_IMAGE, pinned
#   compose/build-extras/               optional ca-bundle.crt and wheelhouse/*.whl for pip
#   fp16doctor/workload/                the workload, copied last
# Layers go from slowest-changing to fastest, so a workload change rebuilds only the last one.
# Works with the classic builder and BuildKit (no BuildKit-only syntax).

ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}

ARG BASE_IMAGE=debian:bookworm-slim
ARG STACK=cpu
# The interpreter whose pip installs the requirements and that runs the workload.
ARG PYTHON=python3
# apt packages, only for bases without Python (cpu: python3 python3-venv on debian:bookworm-slim; tf1.7-cpu:
# python2.7 and python-pip-whl on debian:bullseye-slim).
ARG SYSTEM_PACKAGES=
# When set, a virtual environment at this path holds the pip packages (PYTHON points into it).
ARG VENV=

LABEL org.fp16doctor.managed="true" \
      org.fp16doctor.stack="${STACK}" \
      org.fp16doctor.base-image="${BASE_IMAGE}"

ENV LANG=C.UTF-8 \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    TF_CPP_MIN_LOG_LEVEL=1

RUN set -e; \
    if [ -n "$SYSTEM_PACKAGES" ]; then \
      apt-get update; \
      DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $SYSTEM_PACKAGES; \
      rm -rf /var/lib/apt/lists/*; \
    fi; \
    if [ -n "$VENV" ]; then python3 -m venv "$VENV"; fi; \
    printf '#!/bin/sh\nexec %s "$@"\n' "$PYTHON" > /usr/local/bin/fp16doctor-python; \
    chmod 755 /usr/local/bin/fp16doctor-python; \
    fp16doctor-python -c 'import sys; print("python", sys.version.split()[0])'

# pip settings for proxies and air-gapped hosts; empty means pip's own defaults.
ARG PIP_INDEX_URL=
ARG PIP_EXTRA_INDEX_URL=
ARG PIP_TRUSTED_HOST=
# Pinned pip, setuptools and wheel for a Python without pip (Debian ships none for Python 2.7): Debian's pip
# wheel (apt python-pip-whl), run in place, installs them first, through the same index, CA and wheelhouse.
ARG PIP_BOOTSTRAP=

COPY compose/build-extras/ /opt/fp16doctor/build-extras/
COPY compose/requirements/${STACK}.txt /opt/fp16doctor/requirements.txt
RUN set -e; \
    cd /opt/fp16doctor; \
    [ -n "$PIP_INDEX_URL" ] || unset PIP_INDEX_URL; \
    [ -n "$PIP_EXTRA_INDEX_URL" ] || unset PIP_EXTRA_INDEX_URL; \
    [ -n "$PIP_TRUSTED_HOST" ] || unset PIP_TRUSTED_HOST; \
    if [ -s build-extras/ca-bundle.crt ]; then export PIP_CERT=/opt/fp16doctor/build-extras/ca-bundle.crt; fi; \
    set --; \
    if ls build-extras/wheelhouse/*.whl >/dev/null 2>&1; then \
      set -- --no-index --find-links /opt/fp16doctor/build-extras/wheelhouse; \
    fi; \
    if [ -n "$PIP_BOOTSTRAP" ]; then \
      fp16doctor-python "$(ls /usr/share/python-wheels/pip-*.whl | head -n 1)/pip" install --no-cache-dir \
        --no-deps "$@" $PIP_BOOTSTRAP; \
    fi; \
    if grep -q '^[^#[:space:]]' requirements.txt; then \
      fp16doctor-python -m pip install --no-cache-dir --no-deps "$@" -r requirements.txt; \
    fi; \
    rm -rf build-extras/wheelhouse

# Last: the workload (a change here rebuilds only this layer).
COPY fp16doctor/workload/ /opt/fp16doctor/workload/
WORKDIR /opt/fp16doctor
ENTRYPOINT ["fp16doctor-python", "/opt/fp16doctor/workload/run_workload.py"]
CMD ["--help"]
