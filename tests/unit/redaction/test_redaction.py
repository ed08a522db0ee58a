"""Home directories leave results.json and the report as `~`; the user's own output paths stay whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fp16doctor.redaction import REDACTED, redact, redact_home, redact_home_paths, redact_text
from fp16doctor.results import ResultsWriter, new_document


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/home/alice/venv/bin/python", "~/venv/bin/python"),
        ("/Users/bob/.keras/keras.json", "~/.keras/keras.json"),
        ("python=/home/alice/venv/bin/python3", "python=~/venv/bin/python3"),
        ("/srv/me/.keras", "~/.keras"),  # this user's home, wherever it is
        ("/srv/me", "~"),
        ("/srv/meter/x", "/srv/meter/x"),  # another directory that only starts alike
        ("/mnt/home/alice/x", "/mnt/home/alice/x"),  # not a home: a directory named home elsewhere
        ("/usr/lib/python3/dist-packages", "/usr/lib/python3/dist-packages"),
    ],
)
def test_home_directories_become_tilde(text: str, expected: str) -> None:
    assert redact_home(text, "/srv/me") == expected


def test_the_report_redacts_homes_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/srv/me")
    assert redact_text("cannot open /srv/me/data/train") == "cannot open ~/data/train"


def test_paths_into_the_output_directory_become_relative_to_it() -> None:
    doc = {"argv": ["fp16doctor", "diagnose", "--out", "/home/me/out"],
           "profile": {"xplane": "/home/me/out/profiles/run1.xplane.pb"},
           "python": "/home/me/venv/bin/python", "next door": "/home/me/outer/x",
           "error": "cannot read /home/me/out/script-logs/host-float32.log"}
    out = redact_home_paths(doc, relative_to=["/home/me/out"])
    assert out["argv"][-1] == "~/out"
    assert out["profile"]["xplane"] == "profiles/run1.xplane.pb"  # found again from results.json's folder
    assert out["python"] == "~/venv/bin/python" and out["next door"] == "~/outer/x"
    assert out["error"] == "cannot read ~/out/script-logs/host-float32.log"
    assert doc["python"] == "/home/me/venv/bin/python"  # the input is not changed
    assert redact_home_paths({"log": "/data/out/script-logs/a.log"}, relative_to=["/data/out"]) == {
        "log": "script-logs/a.log"}


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (["--script-arg=--token", "--script-arg=abc123"], ["--script-arg=--token", f"--script-arg={REDACTED}"]),
        (["--script-arg=--token", "--script-arg", "abc123"], ["--script-arg=--token", "--script-arg", REDACTED]),
        (["train.py", "--token", "abc123", "--epochs", "3"], ["train.py", "--token", REDACTED, "--epochs", "3"]),
        (["--slurm-arg=--auth-token", "--slurm-arg=x9"], ["--slurm-arg=--auth-token", f"--slurm-arg={REDACTED}"]),
        (["--token", "--epochs", "3"], ["--token", "--epochs", "3"]),  # a flag without a value keeps the next
        (["--steps", "20", "--out", "out"], ["--steps", "20", "--out", "out"]),
    ],
)
def test_the_value_after_a_secret_flag_in_an_argument_list_is_redacted(words: list[str],
                                                                         expected: list[str]) -> None:
    assert redact(words) == expected


def test_a_forwarded_secret_flag_in_a_command_line_is_redacted() -> None:
    line = "fp16doctor diagnose --script train.py --script-arg=--token --script-arg=abc123 --script-arg=--epochs"
    assert redact_text(line) == ("fp16doctor diagnose --script train.py --script-arg=--token "
                                 f"--script-arg={REDACTED} --script-arg=--epochs")
    assert redact_text("--script-arg=--token --script-arg abc123") == f"--script-arg=--token --script-arg {REDACTED}"
    assert redact_text("password authentication failed") == "password authentication failed"


def test_a_training_pass_is_not_a_password() -> None:
    run = {"ops": {"items": [{"name": "conv2d", "pass": "backward_weights"}]}, "DB_PASSWORD": "x"}
    out = redact(run)
    assert out["ops"]["items"][0]["pass"] == "backward_weights"
    assert out["DB_PASSWORD"] == REDACTED


def test_results_json_on_disk_names_no_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home" / "alice"
    out_dir = home / "runs"
    monkeypatch.setenv("HOME", str(home))
    doc = new_document({"python": {"executable": f"{home}/venv/bin/python"},
                        "keras_config": {"config_path": "/home/bob/.keras/keras.json"}})
    writer = ResultsWriter(out_dir / "results.json", doc)
    writer.add_run({"stack": "host", "precision": "float32", "variant": "original", "status": "ok",
                    "profile": {"xplane": f"{out_dir}/profiles/host-float32.xplane.pb"}})
    text = (out_dir / "results.json").read_text()
    saved = json.loads(text)
    assert saved["host"]["python"]["executable"] == "~/venv/bin/python"
    assert saved["host"]["keras_config"]["config_path"] == "~/.keras/keras.json"
    assert saved["runs"][0]["profile"]["xplane"] == "profiles/host-float32.xplane.pb"
    assert str(home) not in text and "/home/bob" not in text
    # What diagnose keeps in memory (analysis, report) is the measured document, unchanged.
    assert writer.doc["host"]["python"]["executable"] == f"{home}/venv/bin/python"


def test_diagnose_script_with_tokens_in_its_arguments_shares_neither_them_nor_the_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through diagnose: a token given as a script argument, in both forms the CLI takes, is in neither
    results.json nor report.html; the script's logs under --out are named relative to it, not by the home."""
    import fp16doctor.probe as probe
    from fp16doctor.diagnose import DiagnoseOptions, run_diagnose
    from fp16doctor.engines import host as host_engine
    from fp16doctor.engines.spec import RunSpec
    from fp16doctor.errors import DoctorError

    home = tmp_path / "home" / "alice"
    monkeypatch.setenv("HOME", str(home))
    host = {"cpu": {"model": "AMD EPYC", "cores": 2, "flags": ["avx2"]}, "gpus": [], "nvml": {"error": "no driver"},
            "os": "Linux", "python": {"version": "3.11.7", "executable": f"{home}/venv/bin/python"},
            "frameworks": {"keras": {"version": "3.15.1", "backend": "tensorflow"},
                           "tensorflow": {"version": "2.21.0"}}}
    monkeypatch.setattr(probe, "probe_host", lambda python=None: json.loads(json.dumps(host)))

    def fake_run(self: Any, spec: RunSpec, on_event: Any, gpu_index: int | None = None) -> dict[str, Any]:
        assert spec.script is not None and spec.script.log_dir
        log = Path(spec.script.log_dir) / spec.script.log_name(spec)
        log.write_text("Traceback ...\n")
        return {"stack": spec.stack, "precision": spec.precision, "variant": spec.variant, "device": "cpu",
                "status": "failed", "error": "RuntimeError: boom", "script_failure": {"kind": "exception"},
                "script_log": str(log), "command": [spec.script.path, *spec.script.args]}

    monkeypatch.setattr(host_engine.HostEngine, "run", fake_run)
    script = home / "proj" / "train.py"
    script.parent.mkdir(parents=True)
    script.write_text("print('training')\n")
    out = home / "runs" / "first"
    api_key, token = "sk-abcdefghijklmnopqrstuvwxyz123456", "abc123short"
    args = [f"--api-key={api_key}", "--token", token, "--epochs", "3"]
    argv = ["fp16doctor", "diagnose", "--script", str(script), f"--script-arg=--api-key={api_key}",
            "--script-arg=--token", "--script-arg", token, "--script-arg=--epochs", "--script-arg=3", "--out", str(out)]

    class Quiet:
        def note(self, message: str) -> None: ...
        def start_run(self, spec: RunSpec, total: int, index: int) -> None: ...
        def event(self, event: dict[str, Any]) -> None: ...
        def finish_run(self, record: dict[str, Any]) -> None: ...

    with pytest.raises(DoctorError, match="fails under float32 as well"):
        run_diagnose(DiagnoseOptions(out_dir=out, script=script, script_args=args, argv=argv,
                                     precisions=["float32", "float16"]), Quiet())
    for name in ("results.json", "report.html"):
        text = (out / name).read_text()
        assert api_key not in text and token not in text, name
        assert str(home) not in text, name
    saved = json.loads((out / "results.json").read_text())
    assert sorted(r["script_log"] for r in saved["runs"]) == ["script-logs/host-float16.log",
                                                              "script-logs/host-float32.log"]
    assert (out / saved["runs"][0]["script_log"]).is_file()  # found again from the results' folder
    assert saved["invocation"]["script"]["args"] == [f"--api-key={REDACTED}", "--token", REDACTED, "--epochs", "3"]


def test_the_report_names_paths_into_its_own_folder_relative_to_it(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """An output folder outside any home (a build machine's checkout, /scratch): the report, shared like
    results.json, embeds the script's log as results.json names it, relative to the folder they share."""
    from fp16doctor.report import write_report

    monkeypatch.setenv("HOME", str(tmp_path / "elsewhere"))
    out = tmp_path / "scratch" / "out"
    (out / "script-logs").mkdir(parents=True)
    log = out / "script-logs" / "host-float32.log"
    doc = {"schema_version": 1, "host": {"cpu": {"model": "AMD EPYC", "cores": 2}},
           "runs": [{"stack": "host", "precision": "float32", "variant": "original", "device": "cpu",
                     "status": "ok", "step_time_ms": {"median": 10.0, "p10": 9.0, "p90": 11.0, "n": 5},
                     "script_log": str(log)}]}
    write_report([doc], out / "report.html", "html")
    html = (out / "report.html").read_text()
    assert str(out) not in html and "script-logs/host-float32.log" in html
