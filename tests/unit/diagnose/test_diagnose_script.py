"""diagnose --script without a framework: checking the script, the plan and command line, and the one
message a user gets when the script itself cannot run (Keras 2 API, a float32 failure)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from progress_recorder import Recorder
from typer.testing import CliRunner

import fp16doctor.probe as probe
from fp16doctor.cli import app
from fp16doctor.diagnose import DiagnoseOptions, run_diagnose
from fp16doctor.engines import host as host_engine
from fp16doctor.engines.host import HostEngine
from fp16doctor.engines.spec import QUICK, RunSpec, ScriptSpec, script_runner_args
from fp16doctor.errors import EXIT_USAGE, DoctorError
from fp16doctor.knowledge.cuda import version_at_least
from fp16doctor.stacks import all_stacks
from fp16doctor.user_script import display_path, prepare_script, rerun_in_stack, script_failure

CPU_HOST = {
    "cpu": {"model": "AMD EPYC", "cores": 2, "flags": ["avx2"]}, "gpus": [], "nvml": {"error": "no driver"},
    "os": "Linux", "python": {"version": "3.11.7", "executable": "/usr/bin/python3"},
    "frameworks": {"keras": {"version": "3.15.1", "backend": "tensorflow"}, "tensorflow": {"version": "2.21.0"}},
}


def _script(tmp_path: Path) -> Path:
    path = tmp_path / "proj" / "train.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("print('training')\n")
    return path


def test_missing_script_is_a_usage_error_with_a_hint(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["diagnose", "--script", str(tmp_path / "nope.py"), "--out", str(tmp_path)])
    assert isinstance(result.exception, DoctorError) and result.exception.exit_code == EXIT_USAGE
    assert result.exception.message.endswith("nope.py: no such file") and "--script" in result.exception.hint
    with pytest.raises(DoctorError, match="not a file"):
        prepare_script(tmp_path, [], None, tmp_path / "out", None)
    with pytest.raises(DoctorError, match="too few"):
        prepare_script(_script(tmp_path), [], 2, tmp_path / "out", None)


def test_a_python_3_only_script_for_a_python_2_stack_is_a_usage_error_before_anything_runs(tmp_path: Path) -> None:
    script = _script(tmp_path)
    script.write_text('name = "x"\nprint(f"{name}")\n')
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["diagnose", "--script", str(script), "--stack", "tf1.13-cpu", "--no-host",
                                      "--out", str(out)])
    assert isinstance(result.exception, DoctorError) and result.exception.exit_code == EXIT_USAGE
    message = result.exception.message
    assert "\n" not in message and "an f-string (line 2)" in message
    assert "tf1.13-cpu" in message and "Python 2.7.18" in message and "tf2.10-cpu" in result.exception.hint
    assert not out.exists()


def test_a_python_2_script_runs_in_a_python_2_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No refusal any more: the plan for a valid Python 2.7 script in both Python 2 stacks (nothing runs)."""
    monkeypatch.setattr(probe, "probe_host", lambda python=None: json.loads(json.dumps(CPU_HOST)))
    script = _script(tmp_path)
    script.write_text("from __future__ import print_function\nprint('training', end='')\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["diagnose", "--plan", "--json", "--script", str(script), "--stack", "tf1.7-cpu",
                                      "--stack", "tf1.13-cpu", "--no-host", "--precision", "float32",
                                      "--out", str(out)])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    assert plan["cells"] == ["tf1.7-cpu / float32 / original", "tf1.13-cpu / float32 / original"], plan["cells"]
    assert not out.exists()


def test_steps_without_a_script_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["diagnose", "--steps", "20", "--out", str(tmp_path)])
    assert isinstance(result.exception, DoctorError) and result.exception.exit_code == EXIT_USAGE


def test_script_spec_hashes_mounts_and_makes_typed_paths_absolute(tmp_path: Path, monkeypatch) -> None:
    script = _script(tmp_path)
    (tmp_path / "data").mkdir()
    monkeypatch.chdir(tmp_path)
    spec = prepare_script(script, ["data", "--epochs", "3", "not-a-path"], 20, tmp_path / "out",
                          str(tmp_path / "data"))
    assert spec.sha256 == hashlib.sha256(script.read_bytes()).hexdigest()
    # The script runs in a scratch directory: a relative path the user typed must still name the same folder.
    assert spec.args == (str(tmp_path / "data"), "--epochs", "3", "not-a-path")
    assert spec.read_only_dirs == (str(script.parent), str(tmp_path / "data"))
    assert Path(spec.log_dir or "").is_dir() and spec.steps == 20


def test_an_argument_naming_an_existing_file_is_passed_as_typed_and_each_run_gets_a_copy(
        tmp_path: Path, monkeypatch) -> None:
    """A checkpoint the script writes to a path the user typed must not overwrite the user's own file, once per
    precision: the argument stays as typed and names a copy in the run's working directory."""
    script = _script(tmp_path)
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "best.keras").write_text("the user's")
    (tmp_path / "data").mkdir()
    monkeypatch.chdir(tmp_path)
    spec = prepare_script(script, ["models/best.keras", "data", "--out=x"], 20, tmp_path / "out", None)
    assert spec.args == ("models/best.keras", str(tmp_path / "data"), "--out=x")  # a folder stays absolute
    assert spec.copies == (("models/best.keras", str(tmp_path / "models" / "best.keras")),)
    args = script_runner_args(RunSpec("host", "float16", "original", QUICK, script=spec), "/w", "/w/log")
    at = args.index("--copy-in")
    assert args[at + 1] == f"models/best.keras={tmp_path / 'models' / 'best.keras'}"
    assert args[args.index("--") + 2:] == ["models/best.keras", str(tmp_path / "data"), "--out=x"]


def test_runs_show_the_script_with_home_as_a_tilde(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    spec = prepare_script(_script(tmp_path), [], None, tmp_path / "out", None)
    assert spec.label == "~/proj/train.py"
    cmd = HostEngine(python="python3").command(RunSpec("host", "float32", "original", QUICK, script=spec), tmp_path)
    assert cmd[cmd.index("--script-label") + 1] == "~/proj/train.py"


def test_host_command_runs_the_runner_with_the_scripts_arguments_after_the_separator(tmp_path: Path) -> None:
    train = str(tmp_path / "proj" / "train.py")
    script = ScriptSpec(path=train, args=("--epochs", "3"), steps=20, log_dir=str(tmp_path))
    spec = RunSpec("host", "mixed_float16", "original", QUICK, script=script)
    cmd = HostEngine(python="/usr/bin/python3", backend="jax").command(spec, tmp_path)
    assert cmd[:3] == ["/usr/bin/python3", "-u", str(host_engine.WORKLOAD_DIR / "script_runner.py")]
    assert cmd[cmd.index("--precision") + 1] == "mixed_float16" and cmd[cmd.index("--backend") + 1] == "jax"
    assert cmd[cmd.index("--steps") + 1] == "20"
    assert cmd[cmd.index("--log") + 1] == str(tmp_path / "host-mixed_float16.log")
    assert cmd[cmd.index("--workdir") + 1] == str(tmp_path / "work")
    assert cmd[cmd.index("--") + 1:] == [train, "--epochs", "3"]


def test_home_paths_are_shown_with_a_tilde(monkeypatch) -> None:
    monkeypatch.setenv("HOME", "/home/ada")
    assert display_path("/home/ada/proj/train.py") == "~/proj/train.py"
    assert display_path("/home/adam/train.py") == "/home/adam/train.py"


def _failed(precision: str, failure: dict[str, Any], error: str = "") -> dict[str, Any]:
    return {"stack": "host", "precision": precision, "status": "failed", "error": error, "script_failure": failure}


def test_keras2_arguments_name_the_stacks_of_the_catalogue_that_have_them() -> None:
    failure = {"kind": "keras2_arguments", "arguments": ["lr", "decay"], "callable": "RMSprop", "keras": "3.15.1"}
    error = script_failure([_failed(p, failure, "ValueError: Argument(s) not recognized: {'lr': 0.0001}")
                            for p in ("float32", "float16")])
    assert error is not None
    assert "RMSprop(lr=..., decay=...)" in error.message and "Keras 3.15.1 rejects" in error.message
    # Named from stacks.toml: every Keras before 2.11 has both, no later one does.
    named = set(error.message.rpartition("Keras 2 stacks: ")[2].split(", "))
    assert named == {s.name for s in all_stacks() if version_at_least(s.keras, "2.11") is False}
    assert "tf1.7-cpu" in named and "tf1.13-cpu" in named  # Keras 2.1.5 / 2.2.4 on Python 2.7 run scripts too
    assert "tf1.7-cuda9.0" in error.message and "tf1.13-cuda10.0" in error.message
    assert "tf2.10-cpu" in error.message and "each needs an NVIDIA GPU" not in error.message
    # Failed on the CPU: the hint is a stack that runs without a GPU; failed on a GPU: a GPU stack.
    assert "--stack tf2.10-cpu" in error.hint and "learning_rate=" in error.hint
    on_gpu = script_failure([{**_failed("float32", failure, "ValueError"), "device": "gpu:0"}])
    assert on_gpu is not None and "--stack tf1.7-cuda9.0" in on_gpu.hint


def test_the_hint_reruns_the_same_script_and_arguments_in_the_stack_seeing_their_data(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = _script(tmp_path)
    (script.parent / "inside").mkdir()
    for folder in ("data/train", "data/test"):
        (tmp_path / folder).mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    outside = prepare_script(script, ["data/train", "data/test", "--epochs=2"], None, out, None)
    command = rerun_in_stack(outside, "tf2.10-cpu")
    assert command == (f"fp16doctor diagnose --script {script} --script-arg {tmp_path}/data/train --script-arg "
                       f"{tmp_path}/data/test --script-arg=--epochs=2 --data {tmp_path}/data --stack tf2.10-cpu"
                       " --no-host")
    inside = prepare_script(script, ["proj/inside"], None, out, None)  # the script's folder is mounted anyway
    assert "--data" not in rerun_in_stack(inside, "tf2.10-cpu")
    named = prepare_script(script, ["data/train"], None, out, str(tmp_path))  # --data as the user gave it
    assert rerun_in_stack(named, "cpu").endswith(f"--data {tmp_path} --stack cpu --no-host")


def test_a_float32_failure_is_the_scripts_fault_with_its_last_lines() -> None:
    failure = {"kind": "exception", "output_tail": "loading\nTraceback ...\nKeyError: 'label'"}
    runs = [_failed("float32", failure, "KeyError: 'label'"), _failed("float16", failure, "KeyError: 'label'")]
    error = script_failure(runs)
    assert error is not None
    assert error.message.startswith("the script fails under float32 as well: it is the script's fault")
    assert "KeyError: 'label'" in error.message and "its last lines:" in error.hint
    runs[0]["error_location"] = {"file": "train.py", "line": 12, "code": "y = row['label']"}
    error = script_failure(runs)
    assert error is not None and error.message.startswith("the script fails under float32 as well at train.py:12: ")


def test_one_failed_16_bit_run_beside_working_runs_is_no_script_error() -> None:
    runs = [{"stack": "host", "precision": "float32", "status": "ok"},
            _failed("float16", {"kind": "exception"}, "FloatingPointError")]
    assert script_failure(runs) is None


@pytest.fixture
def cpu_host(monkeypatch: pytest.MonkeyPatch) -> list[RunSpec]:
    specs: list[RunSpec] = []
    monkeypatch.setattr(probe, "probe_host", lambda python=None: json.loads(json.dumps(CPU_HOST)))

    def fake_run(self, spec: RunSpec, on_event, gpu_index=None):  # type: ignore[no-untyped-def]
        specs.append(spec)
        return {"stack": spec.stack, "precision": spec.precision, "variant": spec.variant, "device": "cpu",
                "status": "failed", "error": "ValueError: Argument(s) not recognized: {'lr': 0.0001}",
                "script_failure": {"kind": "keras2_arguments", "arguments": ["lr"], "callable": "SGD",
                                   "keras": "3.15.1"}}

    monkeypatch.setattr(host_engine.HostEngine, "run", fake_run)
    return specs


def test_diagnose_script_plans_one_run_per_precision_keeps_results_and_explains(tmp_path: Path, cpu_host) -> None:
    script = _script(tmp_path)
    options = DiagnoseOptions(out_dir=tmp_path / "out", script=script, script_args=["x"], steps=20,
                              precisions=["float32", "float16"])
    with pytest.raises(DoctorError, match=r"SGD\(lr=\.\.\.\)"):
        run_diagnose(options, Recorder())
    # No synthetic_input variant for a script; each run carries the script.
    assert [(s.precision, s.variant) for s in cpu_host] == [("float32", "original"), ("float16", "original")]
    assert {s.script.path if s.script else None for s in cpu_host} == {str(script.resolve())}
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    assert len(doc["runs"]) == 2 and doc["invocation"]["script"]["sha256"] == cpu_host[0].script.sha256
    assert "print('training')" not in (tmp_path / "out" / "results.json").read_text()
    assert (tmp_path / "out" / "report.html").exists()


def test_the_report_names_the_script_and_its_hash(tmp_path: Path) -> None:
    from fp16doctor.report import write_report
    from fp16doctor.results import new_document

    doc = new_document(json.loads(json.dumps(CPU_HOST)))
    doc["runs"] = [{"stack": "host", "precision": p, "variant": "original", "device": "cpu", "status": "ok",
                    "step_time_ms": {"median": ms, "p10": ms, "p90": ms, "n": 20},
                    "workload": {"name": "script", "script": "~/proj/train.py", "script_sha256": "c0ffee" * 10}}
                   for p, ms in (("float32", 20.0), ("float16", 42.0))]
    write_report([doc], tmp_path / "report.html", "html")
    html = (tmp_path / "report.html").read_text()
    assert "~/proj/train.py" in html and "c0ffee" * 10 in html


def test_a_script_digest_survives_redaction_but_an_opaque_blob_does_not() -> None:
    from fp16doctor.report.redact import REDACTED, redact

    digest = hashlib.sha256(b"train").hexdigest()
    assert redact({"script_sha256": digest}) == {"script_sha256": digest}
    assert redact({"note": digest})["note"] == REDACTED


def test_a_variant_that_rewrites_the_model_is_refused_for_a_script(tmp_path: Path) -> None:
    options = DiagnoseOptions(out_dir=tmp_path / "out", script=_script(tmp_path), variants=["channels_padded"])
    with pytest.raises(DoctorError, match="changes the built-in workload") as info:
        run_diagnose(options, Recorder())
    assert info.value.exit_code == EXIT_USAGE and "onednn_off" in info.value.hint


def test_experiments_for_a_script_run_the_script_itself_with_the_one_change(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 40x float16 slowdown on the CPU with no oneDNN names: the planner asks for oneDNN off, and the
    experiment runs the user's script (bounded by its float32), not the built-in workload."""
    monkeypatch.setattr(probe, "probe_host", lambda python=None: json.loads(json.dumps(CPU_HOST)))
    specs: list[RunSpec] = []
    step = {"float32": 10.0, "float16": 400.0}

    def fake_run(self, spec: RunSpec, on_event, gpu_index=None):  # type: ignore[no-untyped-def]
        specs.append(spec)
        ms = step[spec.precision] / (40.0 if spec.variant == "onednn_off" and spec.precision != "float32" else 1.0)
        return {"stack": spec.stack, "precision": spec.precision, "variant": spec.variant, "device": "cpu",
                "status": "ok", "step_time_ms": {"median": ms, "p10": ms * 0.98, "p90": ms * 1.02, "n": 20},
                "software": {"tensorflow": "2.21.0", "keras": "3.15.1", "keras_backend": "tensorflow"},
                "workload": {"name": "script", "script_sha256": spec.script.sha256 if spec.script else None},
                **({"experiment": spec.experiment} if spec.experiment else {})}

    monkeypatch.setattr(host_engine.HostEngine, "run", fake_run)
    recorder = Recorder()
    options = DiagnoseOptions(out_dir=tmp_path / "out", script=_script(tmp_path), steps=20,
                              precisions=["float32", "float16"])
    run_diagnose(options, recorder)
    # The script's precisions are timed again together, in one process of the script itself.
    rounds = [s for s in specs if s.rounds_of]
    assert len(rounds) == 2 and rounds[0].rounds_of == ("float32", "float16") and rounds[0].script is not None
    # The experiment's setting is timed first in rounds of its own, the script run by the script runner; these
    # rounds report nothing here, so each experiment then runs in a process of its own.
    setting = rounds[1]
    assert (setting.variant, setting.rounds_of, setting.script) == ("onednn_off", ("float32", "float16"),
                                                                    rounds[0].script)
    command = " ".join(HostEngine(python="/usr/bin/python3").command(setting, tmp_path, None))
    assert "--variant onednn_off" in command and "--rounds-of float32,float16" in command
    specs = [s for s in specs if not s.rounds_of]
    assert [(s.precision, s.variant) for s in specs] == [
        ("float32", "original"), ("float16", "original"), ("float32", "onednn_off"), ("float16", "onednn_off")]
    experiment = specs[-1]
    assert experiment.script is not None and experiment.script.sha256 == specs[0].script.sha256
    assert experiment.reference_ms == 10.0 and experiment.bound_ms is not None
    args = " ".join(HostEngine(python="/usr/bin/python3").command(experiment, tmp_path, tmp_path / "p"))
    assert "--variant onednn_off" in args and f"--bound-ms {experiment.bound_ms:.3f}" in args
    assert f"--profile-dir {tmp_path / 'p'}" in args
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    confirmed = [f for f in doc["findings"] if f["id"] == "slow_fp16_kernels"]
    assert confirmed and confirmed[0].get("basis") == "experiment", doc["findings"]


def test_script_failures_are_judged_per_stack() -> None:
    """Keras 2 API that fails on the host's Keras 3 but runs in a Keras 2 stack is no error; failing on
    every stack is, and the message names the stack it speaks of."""
    failure = {"kind": "keras2_arguments", "arguments": ["lr"], "callable": "RMSprop", "keras": "3.15.1"}
    host = [{**_failed(p, failure, "ValueError: lr"), "stack": "host"} for p in ("float32", "float16")]
    keras2_ok = [{"stack": "tf2.15-keras2", "precision": p, "status": "ok"} for p in ("float32", "float16")]
    assert script_failure(host + keras2_ok) is None
    crash = {"kind": "exception", "output_tail": "KeyError: 'label'"}
    keras2_failed = [{**_failed(p, crash, "KeyError: 'label'"), "stack": "tf2.15-keras2"} for p in ("float32",)]
    error = script_failure(host + keras2_failed)
    assert error is not None and error.message.startswith("on stack host, the script uses RMSprop(lr=...)")
