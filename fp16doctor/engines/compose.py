"""compose/ generated from the catalogue: one service per stack, plus each stack's requirements file.

    python -m fp16doctor.engines.compose          # write compose/stacks.yaml and compose/requirements/
    python -m fp16doctor.engines.compose --check  # exit 1 when compose/ is out of date

The files are usable on their own, from the repository root:
    docker compose -f compose/stacks.yaml build cpu
    docker compose -f compose/stacks.yaml run --rm cpu --precision float16
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from fp16doctor.engines.context import EXTRAS_GITIGNORE, EXTRAS_README
from fp16doctor.engines.labels import MANAGED_LABEL, STACK_LABEL  # the labels cleanup finds
from fp16doctor.engines.spec import QUICK
from fp16doctor.stacks import StackSpec, all_stacks

COMPOSE_FILE = "stacks.yaml"
REQUIREMENTS_DIR = "requirements"
EXTRAS_DIR = "build-extras"


def _q(value: str) -> str:
    """A YAML double-quoted scalar (JSON strings are valid YAML)."""
    return json.dumps(value)


def service_yaml(spec: StackSpec) -> list[str]:
    args = spec.docker_build_args()
    lines = [
        f"  {_q(spec.name)}:",
        f"    # {spec.description}",
        f"    image: {_q('fp16doctor/' + spec.name + ':compose')}",
        "    build:",
        "      context: ..",
        "      dockerfile: Dockerfile",
        "      args:",
        *[f"        {key}: {_q(value)}" for key, value in args.items()],
        "        PIP_INDEX_URL: ${PIP_INDEX_URL:-}",
        "        PIP_EXTRA_INDEX_URL: ${PIP_EXTRA_INDEX_URL:-}",
        "        PIP_TRUSTED_HOST: ${PIP_TRUSTED_HOST:-}",
        "      labels:",
        f"        {MANAGED_LABEL}: \"true\"",
        f"        {STACK_LABEL}: {_q(spec.name)}",
        "    labels:",
        f"      {MANAGED_LABEL}: \"true\"",
        f"      {STACK_LABEL}: {_q(spec.name)}",
        "    network_mode: none",
        "    command: [" + ", ".join(_q(a) for a in ["--precision", "float32", *QUICK.to_args()]) + "]",
    ]
    if spec.gpu:
        lines += [
            "    environment:",
            "      NVIDIA_DRIVER_CAPABILITIES: \"compute,utility\"",
            "    deploy:",
            "      resources:",
            "        reservations:",
            "          devices:",
            "            - driver: nvidia",
            "              count: 1",
            "              capabilities: [gpu, compute, utility]",
        ]
    return lines


def render_compose(stacks: list[StackSpec]) -> str:
    lines = [
        "# GENERATED from fp16doctor/stacks/stacks.toml by `python -m fp16doctor.engines.compose`;",
        "# do not edit: change the catalogue and regenerate.",
        "# From the repository root:",
        "#   docker compose -f compose/stacks.yaml build cpu",
        "#   docker compose -f compose/stacks.yaml run --rm cpu --precision float16",
        "# GPU services reserve one NVIDIA GPU (needs nvidia-container-toolkit on the engine).",
        "services:",
    ]
    for spec in stacks:
        lines += service_yaml(spec)
    return "\n".join(lines) + "\n"


def expected_files(stacks: list[StackSpec] | None = None) -> dict[str, str]:
    """compose/-relative path -> content, for every generated file."""
    stacks = all_stacks() if stacks is None else stacks
    files = {COMPOSE_FILE: render_compose(stacks), f"{EXTRAS_DIR}/README": EXTRAS_README,
             f"{EXTRAS_DIR}/.gitignore": EXTRAS_GITIGNORE}
    for spec in stacks:
        files[f"{REQUIREMENTS_DIR}/{spec.name}.txt"] = spec.requirements_text()
    return files


def stale_files(compose_dir: Path) -> list[str]:
    """Generated files that are missing or differ on disk (empty: in sync)."""
    stale = []
    for rel, content in expected_files().items():
        path = compose_dir / rel
        if not path.is_file() or path.read_text(encoding="utf-8") != content:
            stale.append(rel)
    return stale


def write_compose(compose_dir: Path) -> list[Path]:
    written = []
    for rel, content in expected_files().items():
        path = compose_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text(encoding="utf-8") != content:
            path.write_text(content, encoding="utf-8")
            written.append(path)
    return written


def default_compose_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "compose"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fp16doctor.engines.compose", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, default=default_compose_dir(), help="the compose/ directory")
    parser.add_argument("--check", action="store_true", help="exit 1 when the files are out of date")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_files(args.dir)
        for rel in stale:
            sys.stderr.write(f"out of date: {args.dir / rel}\n")
        return 1 if stale else 0
    for path in write_compose(args.dir):
        sys.stdout.write(f"wrote {path}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
