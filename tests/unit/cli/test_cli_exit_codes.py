"""Exit statuses as the README's table says, through the real entry point: what was typed wrong is a usage error
(2), whether the parser or a pre-flight check finds it, and nothing runs before it is found."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from cli_helpers import ROOT, SEED, run_cli

import fp16doctor.probe as probe
from fp16doctor import errors


def _readme_exit_table() -> dict[int, str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("### Exit status", 1)[1].split("\n#", 1)[0]
    return {int(code): meaning for code, meaning in re.findall(r"^\| (\d+) \| (.+) \|$", section, re.M)}


def test_the_readme_table_documents_every_exit_status_errors_names() -> None:
    named = {value for name, value in vars(errors).items() if name.startswith("EXIT_")}
    table = _readme_exit_table()
    assert set(table) == named and {0, 1, 2, 3, 130} <= named
    assert "usage" in table[errors.EXIT_USAGE] and "--resume" in table[errors.EXIT_PARTIAL]


@pytest.fixture
def nothing_runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Probing is the first thing diagnose does after its checks: a usage error must come before it."""
    probed: list[str] = []
    monkeypatch.setattr(probe, "probe_host", lambda python=None: probed.append("probe") or {})
    for name in [n for n in os.environ if n.startswith("FP16DOCTOR_")]:
        monkeypatch.delenv(name)
    return probed


USAGE_ERRORS = {
    "an unknown option": (["diagnose", "--fast"], "No such option"),
    "an unknown precision": (["diagnose", "-p", "float8"], "'float8' is not one of float32, float16"),
    "an unknown variant": (["diagnose", "--variant", "onednn"], "'onednn' is not one of original"),
    "two changes to the batches": (["diagnose", "--variant", "synthetic_input+float32_batches"],
                                   "synthetic_input and float32_batches both change the batches"),
    "a change twice": (["diagnose", "--variant", "synthetic_input+xla+xla"], "names xla twice"),
    "oneDNN off beside a GPU stack": (["diagnose", "--stack", "tf2.20-keras3", "--variant",
                                       "synthetic_input+onednn_off"],
                                      "onednn_off switches the CPU's kernels, and tf2.20-keras3 trains on a GPU"),
    "an unknown size": (["diagnose", "--size", "tiny"], "'tiny' is not one of"),
    "a budget too short to run anything": (["diagnose", "--budget", "5"], "--budget"),
    "fewer rounds than an interval needs": (["diagnose", "--rounds", "2"], "--rounds"),
    "two sizes": (["diagnose", "--quick", "--full"], "--full and --quick contradict each other"),
    "a size twice over": (["diagnose", "-q", "--size", "full"], "contradict each other"),
    "an unknown stack": (["diagnose", "--stack", "tf0.1"], "tf0.1"),
    "--docker-host without --stack": (["diagnose", "--docker-host", "tcp://gpu-box:2375"], "--docker-host without"),
    "--no-host without --stack": (["diagnose", "--no-host"], "--no-host without --stack"),
    "a --python that is not there": (["diagnose", "--python", "no-such-python-3.99"], "is not an executable"),
    "a Slurm option without --slurm": (["diagnose", "--partition", "gpu"], "--partition applies to Slurm jobs"),
    "an unknown Keras backend": (["diagnose", "--backend", "mxnet"], "'mxnet' is not one of tensorflow, jax, torch"),
    "--backend with --no-host": (["diagnose", "--backend", "jax", "--no-host", "--stack", "cpu"],
                                 "--backend runs this host's Python on each backend, and --no-host leaves it out"),
    "--backend with --slurm": (["diagnose", "--backend", "jax", "--slurm"], "--backend does not combine with it"),
    "a precision no stack asked can run": (["diagnose", "--stack", "tf1.7-cuda9.0", "--no-host", "-p", "float32",
                                            "-p", "mixed_float16"], "--precision mixed_float16: Keras 2.1.5"),
}


@pytest.mark.parametrize(("argv", "said"), USAGE_ERRORS.values(), ids=USAGE_ERRORS.keys())
def test_what_was_typed_wrong_exits_2_with_one_line_before_anything_runs(
        argv: list[str], said: str, tmp_path: Path, nothing_runs: list[str]) -> None:
    done = run_cli(*argv, "--out", str(tmp_path / "out"))
    assert done.code == errors.EXIT_USAGE, done.stderr
    assert said in " ".join(done.stderr.split()) and "Traceback" not in done.stderr
    assert nothing_runs == []


def test_a_budget_for_a_size_that_keeps_none_exits_2_after_the_probe_finds_no_gpu(
        tmp_path: Path, nothing_runs: list[str]) -> None:
    """The full size on a CPU runs each configuration as its stop rule wants: no wall budget to replace. Whether the
    full size is budgeted (on a GPU) is known once the probe has looked, and nothing runs before the refusal."""
    done = run_cli("diagnose", "--full", "--budget", "300", "-o", str(tmp_path / "out"))
    assert done.code == errors.EXIT_USAGE, done.stderr
    assert "--budget applies to a size with a wall budget" in " ".join(done.stderr.split())
    assert not (tmp_path / "out").exists()


def test_a_data_folder_that_is_not_there_exits_2(tmp_path: Path, nothing_runs: list[str]) -> None:
    done = run_cli("diagnose", "--data", str(tmp_path / "missing"), "-o", str(tmp_path / "out"))
    assert done.code == errors.EXIT_USAGE and "is not a directory" in done.stderr and nothing_runs == []


def test_a_script_that_does_not_compile_exits_2_before_anything_runs(tmp_path: Path, nothing_runs: list[str]) -> None:
    script = tmp_path / "train.py"
    script.write_text("import keras\nmodel = keras.Sequential(\nprint('unclosed')\n")
    source = script.read_text()
    done = run_cli("diagnose", "--script", str(script), "-o", str(tmp_path / "out"))
    assert done.code == errors.EXIT_USAGE, done.stderr
    assert f"--script {script} does not compile on" in " ".join(done.stderr.split()) and "(line " in done.stderr
    assert nothing_runs == [] and not (tmp_path / "out").exists() and script.read_text() == source


def test_an_unknown_report_format_is_the_parsers_usage_error(tmp_path: Path) -> None:
    done = run_cli("report", str(SEED), "--out", str(tmp_path / "r.pdf"), "--format", "pdf")
    assert done.code == errors.EXIT_USAGE and "'pdf' is not one of html, markdown" in done.stderr
    assert not (tmp_path / "r.pdf").exists()


def test_a_file_that_is_no_results_document_exits_1_with_a_hint(tmp_path: Path) -> None:
    bad = tmp_path / "results.json"
    bad.write_text('{"schema_version": 1, "runs": []}')
    done = run_cli("explain", str(bad))
    assert done.code == errors.EXIT_ERROR
    assert "missing required key 'host'" in done.stderr and "hint:" in done.stderr


@pytest.mark.parametrize(("args", "commands"), [((), "probe, diagnose, explain, report, compare, stacks"),
                                                (("stacks",), "list, show, build")])
def test_a_bare_command_group_says_which_command_is_missing(args: tuple[str, ...], commands: str) -> None:
    """Was: its help, then "error: " with nothing after it."""
    done = run_cli(*args)
    assert done.code == errors.EXIT_USAGE
    error = next(line for line in done.stderr.splitlines() if line.startswith("error:"))
    assert error.endswith(f"needs a command: {commands}"), error


def test_version_and_help_exit_0() -> None:
    assert run_cli("--version").code == 0
    helped = run_cli("diagnose", "-h")
    assert helped.code == 0 and "--precision" in helped.stdout


def test_an_out_folder_under_a_file_names_the_file(tmp_path: Path, nothing_runs: list[str]) -> None:
    blocker = tmp_path / "notes.txt"
    blocker.write_text("x")
    done = run_cli("diagnose", "-o", str(blocker / "out"))
    assert done.code == errors.EXIT_USAGE and nothing_runs == []
    assert f"{blocker} is a file, not a folder" in " ".join(done.stderr.split()) and "File exists" not in done.stderr


def test_an_unreachable_docker_engine_stops_diagnose_before_anything_runs_or_is_created(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The engines a diagnose needs are checked before --out is made and before the host's runs (which used to
    train for minutes before the engine was found missing)."""
    from fp16doctor.engines.docker import sdk
    from fp16doctor.engines.host import HostEngine

    ran: list[str] = []
    monkeypatch.setattr(probe, "probe_host", lambda python=None: {"gpus": [], "frameworks": {
        "keras": {"version": "3.15.1"}, "tensorflow": {"version": "2.21.0"}}})
    monkeypatch.setattr(HostEngine, "run", lambda self, spec, *a, **k: ran.append(spec.label))

    def unreachable(docker_host: str | None) -> object:
        raise errors.DoctorError(f"cannot reach the Docker engine at {docker_host}: connection refused",
                                 hint="start it")

    monkeypatch.setattr(sdk, "engine_facts", unreachable)
    out = tmp_path / "out"
    done = run_cli("diagnose", "--stack", "cpu", "--docker-host", "tcp://gpu-box:2376", "-o", str(out))
    assert done.code == errors.EXIT_ERROR, done.stderr
    assert "Docker engine tcp://gpu-box:2376 unreachable: connection refused" in done.stderr
    assert "hint: start it" in done.stderr
    assert ran == [] and not out.exists()
