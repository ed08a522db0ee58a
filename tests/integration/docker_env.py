"""What the Docker integration tests share: the engine they need and the CA bundle builds trust."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fp16doctor.engines.docker import sdk
from fp16doctor.errors import DoctorError

SYSTEM_CA = Path("/etc/ssl/certs/ca-certificates.crt")


def ca_bundle() -> Path | None:
    """The CA pip trusts inside image builds (this CI reaches PyPI through a TLS proxy)."""
    configured = os.environ.get("FP16DOCTOR_CA_BUNDLE")
    if configured:
        return Path(configured)
    return SYSTEM_CA if SYSTEM_CA.is_file() else None


def require_engine(docker_host: str | None = None) -> None:
    """Skip, saying why, where no Docker engine answers."""
    try:
        sdk.client_for(docker_host)
    except DoctorError as exc:
        where = f" at {docker_host}" if docker_host else ""
        pytest.skip(f"no Docker engine reachable{where} ({exc.message}); start one with `bash .ci/docker-up.sh`")
