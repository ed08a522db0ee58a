"""A stack's image build context, assembled in memory and tagged by its content: what a Docker engine is
streamed (engines/docker/build.py) and what a Slurm job's nodes build from (engines/slurm/engine.py).

The context is the top-level Dockerfile, the stack's requirements file, optional pip extras (a CA
bundle, a wheelhouse) and the workload, streamed to the engine as a tar, so remote engines build the
same image as the local one. The tag is fp16doctor/<stack>:<hash of the context and build args>, so
`ensure_image` can skip the build when the engine already has exactly this image.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from fp16doctor import __version__
from fp16doctor.engines import labels
from fp16doctor.errors import DoctorError
from fp16doctor.stacks import StackSpec

Log = Callable[[str], None]
_log = logging.getLogger(__name__)
PACKAGE_DIR = Path(__file__).resolve().parents[1]
REQUIREMENTS_PATH = "compose/requirements/{stack}.txt"
EXTRAS_PATH = "compose/build-extras"
WORKLOAD_PATH = "fp16doctor/workload"
_SPOOL_BYTES = 64 * 1024 * 1024  # contexts larger than this (wheelhouses) spill to a temporary file
# compose/build-extras/ holds the same two files, so compose and fp16doctor builds share layers.
EXTRAS_GITIGNORE = "ca-bundle.crt\nwheelhouse/\n"
EXTRAS_README = """\
Optional inputs to every stack build (copied into the image before pip runs):

  ca-bundle.crt   a CA bundle pip trusts (corporate or CI TLS proxies)
  wheelhouse/     *.whl files; when present pip installs from here only (--no-index)

`fp16doctor stacks build --ca-bundle/--wheelhouse` fills these for you in its in-memory build context.
"""

@dataclass(frozen=True)
class BuildOptions:
    docker_host: str | None = None
    ca_bundle: Path | None = None  # a CA bundle pip trusts inside the build (TLS proxies)
    wheelhouse: Path | None = None  # *.whl files; pip then installs from them only (air-gapped)
    pip_index_url: str | None = None
    pip_extra_index_url: str | None = None
    pip_trusted_host: str | None = None
    nocache: bool = False  # ignore the engine's layer cache
    pull: bool = False  # re-pull the base image even when the engine has it


# Where a CA bundle for builds comes from when none is given: our own variable, then pip's own
# (a host whose pip trusts a proxy's CA needs the same CA inside the image's pip).
CA_BUNDLE_ENV = ("FP16DOCTOR_CA_BUNDLE", "PIP_CERT")


def default_ca_bundle() -> Path | None:
    for name in CA_BUNDLE_ENV:
        value = os.environ.get(name)
        if value and Path(value).is_file():
            return Path(value)
    return None


def dockerfile_path() -> Path:
    """The top-level Dockerfile: packaged in the wheel as fp16doctor/_data/Dockerfile, or the checkout's."""
    for candidate in (PACKAGE_DIR / "_data" / "Dockerfile", PACKAGE_DIR.parent / "Dockerfile"):
        if candidate.is_file():
            return candidate
    raise DoctorError("the fp16doctor Dockerfile is missing from this installation",
                      hint="reinstall fp16doctor, or run from a checkout of its repository")


def workload_files() -> dict[str, bytes]:
    """fp16doctor/workload/* (no caches), keyed by their path in the context."""
    root = PACKAGE_DIR / "workload"
    files: dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo"):
            files[f"{WORKLOAD_PATH}/{path.relative_to(root).as_posix()}"] = path.read_bytes()
    if f"{WORKLOAD_PATH}/run_workload.py" not in files:
        raise DoctorError("fp16doctor/workload/run_workload.py is missing", hint="reinstall fp16doctor")
    return files


def _wheels(wheelhouse: Path) -> list[Path]:
    if not wheelhouse.is_dir():
        raise DoctorError(f"--wheelhouse {wheelhouse} is not a directory",
                          hint="pip download -r compose/requirements/<stack>.txt -d DIR first")
    wheels = sorted(wheelhouse.glob("*.whl")) + sorted(wheelhouse.glob("*.tar.gz"))
    if not wheels:
        raise DoctorError(f"--wheelhouse {wheelhouse} holds no .whl or .tar.gz files",
                          hint="fill it with `pip download --no-deps -r compose/requirements/<stack>.txt`")
    return wheels


def context_files(stack: StackSpec, options: BuildOptions) -> dict[str, bytes | Path]:
    """Every file of the build context, by its path in the tar (bytes, or a file to stream)."""
    files: dict[str, bytes | Path] = {
        "Dockerfile": dockerfile_path().read_bytes(),
        REQUIREMENTS_PATH.format(stack=stack.name): stack.requirements_text().encode(),
        # The same README as compose/build-extras/, so compose and fp16doctor builds share layers.
        f"{EXTRAS_PATH}/README": EXTRAS_README.encode(),
        f"{EXTRAS_PATH}/.gitignore": EXTRAS_GITIGNORE.encode(),
    }
    if options.ca_bundle is not None:
        if not options.ca_bundle.is_file():
            raise DoctorError(f"--ca-bundle {options.ca_bundle} is not a file",
                              hint="pass a PEM bundle, e.g. /etc/ssl/certs/ca-certificates.crt")
        files[f"{EXTRAS_PATH}/ca-bundle.crt"] = options.ca_bundle.read_bytes()
    if options.wheelhouse is not None:
        for wheel in _wheels(options.wheelhouse):
            files[f"{EXTRAS_PATH}/wheelhouse/{wheel.name}"] = wheel
    files.update(workload_files())
    return files


def build_args(stack: StackSpec, options: BuildOptions) -> dict[str, str]:
    args = stack.docker_build_args()
    args["PIP_INDEX_URL"] = options.pip_index_url or ""
    args["PIP_EXTRA_INDEX_URL"] = options.pip_extra_index_url or ""
    args["PIP_TRUSTED_HOST"] = options.pip_trusted_host or ""
    return args


def context_hash(files: dict[str, bytes | Path], args: dict[str, str]) -> str:
    """12 hex digits naming exactly this context: same inputs, same tag, on every engine."""
    digest = hashlib.sha256(json.dumps(args, sort_keys=True).encode())
    for name in sorted(files):
        content = files[name]
        digest.update(name.encode() + b"\0")
        if isinstance(content, Path):
            stat = content.stat()  # wheels are immutable by name; size guards against truncation
            digest.update(f"{stat.st_size}".encode())
        else:
            digest.update(hashlib.sha256(content).digest())
    return digest.hexdigest()[:12]


def image_tag(stack: StackSpec, digest: str) -> str:
    return f"fp16doctor/{stack.name}:{digest}"


def make_tar(files: dict[str, bytes | Path]) -> IO[bytes]:
    """The context as an uncompressed tar, rewound; fixed owners and mtimes keep it reproducible."""
    spool = tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES)  # noqa: SIM115 (returned open)
    with tarfile.open(fileobj=spool, mode="w") as tar:
        for name in sorted(files):
            content = files[name]
            info = tarfile.TarInfo(name)
            info.mode = 0o644
            info.mtime = 0
            if isinstance(content, Path):
                info.size = content.stat().st_size
                with content.open("rb") as handle:
                    tar.addfile(info, handle)
            else:
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
    spool.seek(0)
    return spool


def image_labels(stack: StackSpec, digest: str) -> dict[str, str]:
    return {labels.MANAGED_LABEL: "true", labels.STACK_LABEL: stack.name,
            labels.CONTEXT_LABEL: digest, labels.VERSION_LABEL: __version__}


