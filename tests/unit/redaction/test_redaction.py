"""Home directories leave results.json and the report as `~`; the user's own output paths stay whole."""

from __future__ import annotations

import json
from pathlib import Path

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


def test_paths_into_the_output_directory_stay_usable() -> None:
    doc = {"argv": ["fp16doctor", "diagnose", "--out", "/home/me/out"],
           "profile": {"xplane": "/home/me/out/profiles/run1.xplane.pb"},
           "python": "/home/me/venv/bin/python", "next door": "/home/me/outer/x"}
    out = redact_home_paths(doc, keep=["/home/me/out"])
    assert out["argv"][-1] == "/home/me/out"
    assert out["profile"]["xplane"] == "/home/me/out/profiles/run1.xplane.pb"
    assert out["python"] == "~/venv/bin/python" and out["next door"] == "~/outer/x"
    assert doc["python"] == "/home/me/venv/bin/python"  # the input is not changed


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
    assert saved["runs"][0]["profile"]["xplane"] == f"{out_dir}/profiles/host-float32.xplane.pb"
    assert str(home) + "/venv" not in text and "/home/bob" not in text
    # What diagnose keeps in memory (analysis, report) is the measured document, unchanged.
    assert writer.doc["host"]["python"]["executable"] == f"{home}/venv/bin/python"
