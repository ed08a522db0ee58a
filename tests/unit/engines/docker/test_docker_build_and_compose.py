"""compose/ stays generated from the catalogue, and the build context is what the Dockerfile expects."""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

import pytest

from fp16doctor.engines.compose import default_compose_dir, expected_files, render_compose, stale_files
from fp16doctor.engines.context import BuildOptions, build_args, context_files, context_hash, dockerfile_path, make_tar
from fp16doctor.errors import DoctorError
from fp16doctor.stacks import all_stacks, get_stack

ROOT = Path(__file__).resolve().parents[4]


def test_compose_files_are_in_sync_with_the_catalogue() -> None:
    stale = stale_files(default_compose_dir())
    assert not stale, f"run `python -m fp16doctor.engines.compose` to regenerate: {stale}"


def test_every_stack_is_a_compose_service_and_gpu_stacks_reserve_a_gpu() -> None:
    text = render_compose(all_stacks())
    blocks = re.split(r"\n  \"", text)
    for stack in all_stacks():
        block = next(b for b in blocks if b.startswith(f'{stack.name}":'))
        assert f'BASE_IMAGE: "{stack.base_image}"' in block
        assert ("driver: nvidia" in block) == stack.gpu
        assert ("capabilities: [gpu, compute, utility]" in block) == stack.gpu


def test_requirements_files_hold_every_pin() -> None:
    files = expected_files()
    for stack in all_stacks():
        lines = files[f"requirements/{stack.name}.txt"].splitlines()
        pins = [line for line in lines if not line.startswith("#")]
        assert pins == list(stack.requirements)


def test_dockerfile_copies_the_workload_last_and_takes_the_catalogue_args() -> None:
    text = dockerfile_path().read_text()
    steps = [line.split()[0] for line in text.splitlines() if re.match(r"^[A-Z]+\s", line)]
    copies = [line for line in text.splitlines() if line.startswith("COPY")]
    assert "fp16doctor/workload/" in copies[-1]
    assert steps.index("ENTRYPOINT") > text.count("RUN") - 1
    for arg in get_stack("cpu").docker_build_args():
        assert re.search(rf"^ARG {arg}\b", text, re.MULTILINE), arg
    assert "/opt/fp16doctor/workload/" in copies[-1]
    assert "LABEL org.fp16doctor.managed" in text


def test_build_context_is_complete_and_its_hash_tracks_the_workload(tmp_path: Path) -> None:
    cpu = get_stack("cpu")
    files = context_files(cpu, BuildOptions())
    assert {"Dockerfile", "compose/requirements/cpu.txt", "fp16doctor/workload/run_workload.py"} <= set(files)
    assert not any("__pycache__" in name for name in files)
    digest = context_hash(files, build_args(cpu, BuildOptions()))
    changed = dict(files)
    changed["fp16doctor/workload/run_workload.py"] = b"print('changed')\n"
    assert context_hash(changed, build_args(cpu, BuildOptions())) != digest
    assert context_hash(dict(files), build_args(cpu, BuildOptions())) == digest
    with tarfile.open(fileobj=make_tar(files)) as tar:
        assert set(tar.getnames()) == set(files)


def test_ca_bundle_and_wheelhouse_go_into_the_context(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    house = tmp_path / "wheels"
    house.mkdir()
    (house / "keras-2.1.5-py2.py3-none-any.whl").write_bytes(b"PK")
    files = context_files(get_stack("tf1.7-cuda9.0"), BuildOptions(ca_bundle=ca, wheelhouse=house))
    assert files["compose/build-extras/ca-bundle.crt"].startswith(b"-----BEGIN")  # type: ignore[union-attr]
    assert "compose/build-extras/wheelhouse/keras-2.1.5-py2.py3-none-any.whl" in files
    with pytest.raises(DoctorError):
        context_files(get_stack("cpu"), BuildOptions(wheelhouse=tmp_path / "missing"))


def test_pip_index_settings_become_build_args() -> None:
    args = build_args(get_stack("cpu"), BuildOptions(pip_index_url="https://pypi.corp/simple"))
    assert args["PIP_INDEX_URL"] == "https://pypi.corp/simple"
    assert args["VENV"] == "/opt/venv" and args["STACK"] == "cpu"


def test_dockerignore_keeps_the_repository_context_small() -> None:
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    assert "*" in ignore
    for needed in ("!Dockerfile", "!compose/requirements/", "!compose/build-extras/",
                   "!fp16doctor/workload/"):
        assert needed in ignore
