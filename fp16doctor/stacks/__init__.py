"""The pinned software stacks: the catalogue (stacks.toml, one source of truth) as typed data.

`fp16doctor stacks list|show` reads it without Docker; the Dockerfile, compose/stacks.yaml and the
Docker engine take every pin from here.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI
    import tomli as tomllib

from fp16doctor.errors import EXIT_USAGE, DoctorError
from fp16doctor.workload.protocol import (
    DTYPE_POLICY_API,
    KERAS_3,
    PRECISIONS,
    keras_takes,
    precision_of,
)

CATALOGUE_FILE = "stacks.toml"
MIXED_PRECISION_MODES = ("keras_policy", "none")


@dataclass(frozen=True)
class StackBase:
    """What the base image already holds, as recorded from its own Dockerfile or release notes."""

    os: str
    glibc: str
    pip: str
    contents: tuple[str, ...]
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {"os": self.os, "glibc": self.glibc, "pip": self.pip, "contents": list(self.contents),
                "source": self.source}


@dataclass(frozen=True)
class StackSpec:
    """One fully pinned stack: base image plus every pip package installed on top."""

    name: str
    description: str
    base_image: str
    python: str
    python_executable: str
    tensorflow: str
    keras: str
    keras_backend: str
    cuda: str | None
    cudnn: str | None
    gpu: bool
    needs_gpu: bool
    mixed_precision: str
    requirements: tuple[str, ...]
    base: StackBase
    system_packages: tuple[str, ...] = ()
    venv: str | None = None
    # pip itself and what builds source releases, installed first where the base's Python has no pip of its own
    # (Debian ships none for Python 2.7): Debian's pip wheel, run in place, installs these pins.
    pip_bootstrap: tuple[str, ...] = ()

    def pins(self) -> dict[str, str]:
        """requirements as {normalised name: version}."""
        out: dict[str, str] = {}
        for req in self.requirements:
            name, _, version = req.partition("==")
            out[normalise_name(name)] = version
        return out

    def supports_precision(self, precision: str) -> bool:
        """Whether this stack's Keras takes the precision, by the precision table's rule (workload/protocol.py
        keras_takes): float32/float16 run everywhere; the mixed policies need a Keras with a dtype-policy API;
        floatx bfloat16 only Keras 3 accepts (Keras 2 and tf_keras check floatx against float16/32/64)."""
        if precision_of(precision) is None:
            return False
        major = self.keras.split(".")[0]
        return keras_takes(precision, int(major) if major.isdigit() else 0, self.mixed_precision != "none")

    def precision_refusal(self, precision: str) -> str | None:
        """Why the stack cannot run a precision at all (its run is recorded skipped with this), or None."""
        if self.supports_precision(precision):
            return None
        spec = precision_of(precision)
        needs = spec.keras if spec is not None else None
        if needs == DTYPE_POLICY_API:
            return (f"Keras {self.keras} in the {self.name} stack has no mixed-precision dtype policy for "
                    f"{precision} (a tf.keras >= 2.1 and Keras 3 API); float16 via floatx is its only 16-bit mode")
        if needs == KERAS_3:
            return (f"Keras {self.keras} in the {self.name} stack refuses floatx {precision} "
                    "(only Keras 3's keras.config.set_floatx accepts it)")
        return f"the {self.name} stack cannot run {precision}"

    def requirements_text(self) -> str:
        """The requirements file the image build installs (`pip install --no-deps -r`)."""
        header = f"# {self.name}: every pip package installed on top of {self.base_image}\n"
        return header + "".join(f"{req}\n" for req in self.requirements)

    def docker_build_args(self) -> dict[str, str]:
        """The top-level Dockerfile's build args for this stack (pip index settings are added per build)."""
        return {
            "BASE_IMAGE": self.base_image,
            "STACK": self.name,
            "PYTHON": self.python_executable,
            "SYSTEM_PACKAGES": " ".join(self.system_packages),
            "VENV": self.venv or "",
            "PIP_BOOTSTRAP": " ".join(self.pip_bootstrap),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "base_image": self.base_image,
            "python": self.python,
            "python_executable": self.python_executable,
            "tensorflow": self.tensorflow,
            "keras": self.keras,
            "keras_backend": self.keras_backend,
            "cuda": self.cuda,
            "cudnn": self.cudnn,
            "gpu": self.gpu,
            "needs_gpu": self.needs_gpu,
            "mixed_precision": self.mixed_precision,
            "precisions": [p for p in PRECISIONS if self.supports_precision(p)],
            # Every pip package installed on top of the base image: the bootstrap's pip, setuptools and wheel too.
            "requirements": list(self.pip_bootstrap + self.requirements),
            "system_packages": list(self.system_packages),
            "venv": self.venv,
            "pip_bootstrap": list(self.pip_bootstrap),
            "base_contents": self.base.to_dict(),
            "limits": _limits(self),
        }


def normalise_name(name: str) -> str:
    """PEP 503 name normalisation: "Keras_Preprocessing" -> "keras-preprocessing"."""
    out = name.strip().lower()
    for ch in "_.":
        out = out.replace(ch, "-")
    while "--" in out:
        out = out.replace("--", "-")
    return out


def _limits(spec: StackSpec) -> dict[str, Any]:
    """The CUDA toolkit's limits the pre-flight check uses (fp16doctor.knowledge.cuda)."""
    if not spec.cuda:
        return {}
    from fp16doctor.knowledge import cuda

    entry = cuda.toolkit(spec.cuda)
    if entry is None:
        return {}
    return {
        "min_compute_capability": entry.min_compute_capability,
        "max_compute_capability": entry.max_compute_capability,
        "min_driver": cuda.min_driver_for(spec.cuda),
        "toolkit_driver": entry.min_linux_driver,
    }


def _parse_stack(raw: dict[str, Any]) -> StackSpec:
    where = f"stack {raw.get('name', '?')!r} in {CATALOGUE_FILE}"
    try:
        base_raw = raw["base"]
        base = StackBase(
            os=str(base_raw["os"]), glibc=str(base_raw["glibc"]), pip=str(base_raw["pip"]),
            contents=tuple(str(c) for c in base_raw["contents"]), source=str(base_raw["source"]),
        )
        spec = StackSpec(
            name=str(raw["name"]),
            description=str(raw["description"]),
            base_image=str(raw["base_image"]),
            python=str(raw["python"]),
            python_executable=str(raw["python_executable"]),
            tensorflow=str(raw["tensorflow"]),
            keras=str(raw["keras"]),
            keras_backend=str(raw.get("keras_backend", "tensorflow")),
            cuda=raw.get("cuda"),
            cudnn=raw.get("cudnn"),
            gpu=bool(raw["gpu"]),
            needs_gpu=bool(raw.get("needs_gpu", False)),
            mixed_precision=str(raw["mixed_precision"]),
            requirements=tuple(str(r) for r in raw["requirements"]),
            base=base,
            system_packages=tuple(str(p) for p in raw.get("system_packages", ())),
            venv=raw.get("venv") or None,
            pip_bootstrap=tuple(str(p) for p in raw.get("pip_bootstrap", ())),
        )
    except KeyError as exc:
        raise DoctorError(f"{where} lacks the field {exc.args[0]!r}", hint="every stack needs the fields "
                          "that fp16doctor/stacks/stacks.toml documents at its top") from exc
    if spec.mixed_precision not in MIXED_PRECISION_MODES:
        raise DoctorError(f"{where}: mixed_precision must be one of {', '.join(MIXED_PRECISION_MODES)}")
    for req in spec.requirements + spec.pip_bootstrap:
        name, sep, version = req.partition("==")
        if not sep or not name.strip() or not version.strip() or any(c in version for c in "<>=!~*, "):
            raise DoctorError(f"{where}: requirement {req!r} is not pinned as name==version",
                              hint="pin every package exactly")
    if spec.gpu != (spec.cuda is not None):
        raise DoctorError(f"{where}: a gpu stack names its CUDA version, a CPU stack none")
    return spec


@lru_cache(maxsize=1)
def _catalogue() -> tuple[StackSpec, ...]:
    text = resources.files(__package__).joinpath(CATALOGUE_FILE).read_text(encoding="utf-8")
    data = tomllib.loads(text)
    stacks = tuple(_parse_stack(raw) for raw in data.get("stack", []))
    names = [s.name for s in stacks]
    if len(set(names)) != len(names):
        raise DoctorError(f"{CATALOGUE_FILE} names a stack twice", hint=", ".join(sorted(names)))
    return stacks


def all_stacks() -> list[StackSpec]:
    """Every stack in catalogue order."""
    return list(_catalogue())


def stack_names() -> list[str]:
    return [s.name for s in _catalogue()]


def get_stack(name: str) -> StackSpec:
    """The stack called `name`; an unknown name is a usage error whose hint lists the real ones."""
    for spec in _catalogue():
        if spec.name == name:
            return spec
    raise DoctorError(f"unknown stack {name!r}", hint="known stacks: " + ", ".join(stack_names()),
                      exit_code=EXIT_USAGE)
