"""The stack catalogue as users see it: `stacks list/show`, the contract fields, every pin exact."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from fp16doctor import cli
from fp16doctor.cli import app
from fp16doctor.errors import EXIT_INTERRUPTED, DoctorError
from fp16doctor.stacks import all_stacks, get_stack

CONTRACT_FIELDS = (
    "name", "base_image", "python", "tensorflow", "keras", "cuda", "cudnn", "gpu", "requirements",
)
PIN = re.compile(r"^[a-z0-9][a-z0-9._-]*==[0-9][A-Za-z0-9.+]*$")


def test_stacks_list_json_gives_the_contract_fields_for_every_stack() -> None:
    result = CliRunner().invoke(app, ["stacks", "list", "--json"])
    assert result.exit_code == 0, result.output
    listed = json.loads(result.stdout)
    assert {s["name"] for s in listed} >= {"tf1.7-cuda9.0", "tf1.13-cuda10.0", "tf1.15-ngc23.03", "cpu"}
    for stack in listed:
        for key in CONTRACT_FIELDS:
            assert key in stack, (stack["name"], key)
        assert isinstance(stack["gpu"], bool)
        assert (stack["cuda"] is None) == (not stack["gpu"])
        assert stack["requirements"], f"{stack['name']} installs nothing on top of its base"
        for req in stack["requirements"]:
            assert PIN.match(req), f"{stack['name']}: {req!r} is not name==version"


def test_the_2018_stacks_are_pinned_as_the_question_describes() -> None:
    old = get_stack("tf1.7-cuda9.0")
    assert (old.base_image, old.python, old.tensorflow, old.keras, old.cuda, old.cudnn) == (
        "tensorflow/tensorflow:1.7.0-gpu-py3", "3.5.2", "1.7.0", "2.1.5", "9.0", "7.0.5")
    assert "keras==2.1.5" in old.requirements
    new = get_stack("tf1.13-cuda10.0")
    assert (new.tensorflow, new.keras, new.cuda, new.python) == ("1.13.1", "2.2.4", "10.0", "3.5.2")
    # keras-preprocessing 1.0.5 is the release Keras 2.2.4 resolved (float32 batches whatever floatx)
    assert new.pins()["keras-preprocessing"] == "1.0.5"
    assert not old.supports_precision("mixed_float16")


def test_there_is_a_tf2_gpu_stack_with_mixed_float16_and_a_keras3_stack() -> None:
    stacks = all_stacks()
    tf2_gpu = [s for s in stacks if s.gpu and s.tensorflow.startswith("2.")]
    assert any(s.supports_precision("mixed_float16") for s in tf2_gpu)
    assert any(s.keras.startswith("3.") and s.gpu for s in stacks)


def test_cpu_stack_is_debian_bookworm_with_a_venv() -> None:
    cpu = get_stack("cpu")
    assert cpu.base_image == "debian:bookworm-slim"
    assert not cpu.gpu and cpu.cuda is None and cpu.cudnn is None
    assert cpu.python.startswith("3.11")
    assert cpu.venv and cpu.python_executable.startswith(cpu.venv)
    assert any(r.startswith("tensorflow-cpu==") for r in cpu.requirements)


def test_no_stack_pins_a_package_twice() -> None:
    for stack in all_stacks():
        names = [r.partition("==")[0] for r in stack.requirements]
        assert len(names) == len(set(names)), stack.name


def test_unknown_stack_is_a_usage_error_listing_the_names() -> None:
    with pytest.raises(DoctorError) as caught:
        get_stack("tf0.1")
    assert "tf0.1" in caught.value.message
    for stack in all_stacks():
        assert stack.name in caught.value.hint


def test_stacks_show_prints_every_pin_and_the_base_contents() -> None:
    result = CliRunner().invoke(app, ["stacks", "show", "tf1.7-cuda9.0"])
    assert result.exit_code == 0, result.output
    for req in get_stack("tf1.7-cuda9.0").requirements:
        assert req in result.stdout
    assert "libcudnn7=7.0.5" in result.stdout


def test_stacks_list_table_names_every_stack() -> None:
    result = CliRunner().invoke(app, ["stacks", "list"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for stack in all_stacks():
        assert stack.name in result.stdout


def test_ctrl_c_outside_diagnose_claims_no_kept_results(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # e.g. during `stacks build`: there is no results.json to speak of.
    def interrupted(**_options: object) -> None:  # called as the app is: app(standalone_mode=False)
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "app", interrupted)
    with pytest.raises(SystemExit) as exited:
        cli.main()
    assert exited.value.code == EXIT_INTERRUPTED
    assert capsys.readouterr().err.strip() == "interrupted"


def test_the_cpu_twin_says_what_it_is_and_pins_its_whole_closure_for_python_2_7() -> None:
    twin = get_stack("tf1.7-cpu")
    assert (twin.tensorflow, twin.keras, twin.python, twin.base_image) == ("1.7.0", "2.1.5", "2.7.18",
                                                                           "debian:bullseye-slim")
    assert not twin.gpu and not twin.needs_gpu and twin.cuda is None and not twin.venv
    # In its own words: the 2018 CPU builds on Python 2.7, not the question's Python 3.5 + CUDA 9.0 stack.
    for words in ("CPU", "Python 2.7.18", "not the question's Python 3.5 + CUDA 9.0", "float16 slower"):
        assert words in twin.description, words
    assert {"tensorflow", "tensorboard", "keras", "numpy", "protobuf", "mock", "enum34"} <= set(twin.pins())
    assert twin.docker_build_args()["PIP_BOOTSTRAP"].split() == list(twin.pip_bootstrap)
    assert any(p.startswith("pip==") for p in twin.pip_bootstrap)
    assert not twin.supports_precision("mixed_float16") and twin.supports_precision("float16")


def test_only_a_stack_without_pip_bootstraps_one() -> None:
    # Every other stack's Dockerfile steps stay as they were: an empty PIP_BOOTSTRAP skips the bootstrap.
    assert {s.name for s in all_stacks() if s.pip_bootstrap} == {"tf1.7-cpu", "tf1.13-cpu"}
    assert all(s.python.startswith("2.") for s in all_stacks() if s.pip_bootstrap)


def test_the_second_twin_is_the_upgrade_on_the_same_recipe() -> None:
    twin, gpu = get_stack("tf1.13-cpu"), get_stack("tf1.13-cuda10.0")
    assert (twin.tensorflow, twin.keras, twin.python) == (gpu.tensorflow, gpu.keras, "2.7.18")
    assert twin.base_image == get_stack("tf1.7-cpu").base_image and not twin.gpu
    # The Keras companions the GPU stack pins (keras-preprocessing 1.0.5 builds float32 batches).
    for name in ("keras-applications", "keras-preprocessing"):
        assert twin.pins()[name] == gpu.pins()[name]
    for words in ("CPU", "Python 2.7.18", "second half", "not the question's Python 3.7.3 + CUDA 10.0"):
        assert words in twin.description, words


def test_stacks_show_names_the_twin_and_its_pip_bootstrap() -> None:
    result = CliRunner().invoke(app, ["stacks", "show", "tf1.7-cpu"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "Python 2.7.18" in result.output and "pip==20.3.4" in result.output
    assert "tensorflow==1.7.0" in result.output
