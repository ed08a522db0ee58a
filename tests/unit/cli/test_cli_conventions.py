"""The conventions of the tools fp16doctor's users live in (docker, nvidia-smi, pytest, sbatch): -h, short options,
completion, FP16DOCTOR_* variables named in --help, help panels, probe --markdown."""

from __future__ import annotations

import json
import os
import re

import pytest
from cli_helpers import ROOT, run_cli

import fp16doctor.probe as probe
from fp16doctor import cli


@pytest.fixture(autouse=True)
def wide_help(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # rich wraps help to the terminal; a wide one keeps each line whole


@pytest.mark.parametrize("argv", [["-h"], ["diagnose", "-h"], ["report", "-h"], ["explain", "-h"], ["stacks", "-h"],
                                  ["stacks", "list", "-h"], ["probe", "-h"]])
def test_dash_h_is_help_everywhere(argv: list[str]) -> None:
    done = run_cli(*argv)
    assert done.code == 0 and "Usage:" in done.stdout


def test_diagnose_help_names_the_short_options_the_variables_and_its_panels() -> None:
    text = " ".join(run_cli("diagnose", "--help").stdout.split())
    for short, long in (("-o", "--out"), ("-q", "--quick"), ("-s", "--stack"), ("-p", "--precision"),
                        ("-v", "--verbose")):
        assert re.search(rf"{long}\s*│?\s*{short}\b", text), (short, long)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"`(FP16DOCTOR_[A-Z_]+)`", readme.split("### Conventions", 1)[1].split("\n#", 1)[0]))
    assert len(documented) >= 10
    for name in documented:
        assert f"env var: {name}" in text, name
    for panel in ("What to run", "Output", "Docker stacks", "Slurm", "Your own script"):
        assert f"─ {panel} ─" in text
    assert "<bool>" not in text.replace("--help -h <bool>", "")


def test_short_options_parse_as_their_long_forms(tmp_path) -> None:
    done = run_cli("diagnose", "-s", "no-such-stack", "-p", "float16", "-o", str(tmp_path / "out"))
    assert done.code == 2 and "no-such-stack" in done.stderr


def test_completion_is_on_and_completes_stacks_precisions_and_variants() -> None:
    assert "--install-completion" in run_cli("--help").stdout
    assert "tf1.7-cuda9.0" in cli._complete_stack("tf1.7") and "cpu" in cli._complete_stack("")
    assert cli._complete_precision("mixed_") == ["mixed_float16", "mixed_bfloat16"]
    assert cli._complete_variant("onednn") == ["onednn_off"]


def test_probe_markdown_is_a_fenced_block_with_homes_as_a_tilde(monkeypatch: pytest.MonkeyPatch) -> None:
    home = os.path.expanduser("~")
    host = {"os": "Windows 10", "cpu": {"model": "Intel Core i7-8700K", "cores": 12, "flags": ["avx2", "f16c"]},
            "gpus": [{"index": 0, "name": "NVIDIA TITAN V", "compute_capability": "7.0", "driver_version": "390.77"}],
            "python": {"version": "3.5.2", "executable": f"{home}/venvs/tf17/bin/python"},
            "keras_config": {"config_path": f"{home}/.keras/keras.json", "floatx": "float16"}}
    monkeypatch.setattr(probe, "probe_host", lambda python=None: json.loads(json.dumps(host)))
    done = run_cli("probe", "--markdown")
    assert done.code == 0, done.stderr
    assert done.stdout.startswith("### fp16doctor probe") and "\n```text\n" in done.stdout
    assert done.stdout.rstrip().endswith("```")
    assert "NVIDIA TITAN V" in done.stdout and "~/.keras/keras.json" in done.stdout and home not in done.stdout
    assert run_cli("probe", "--markdown", "--json").code == 2
