"""The one check of a diagnose command line: what diagnose refuses, it refuses, with no side effect; and every
command fp16doctor prints (a prescription's untested ideas, a finding's text, the report and the terminal) passes
it, over every results document in the repository."""

from __future__ import annotations

import html
import inspect
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from fp16doctor import cli
from fp16doctor.analysis import diagnose_document
from fp16doctor.invocation import SHORT_OPTIONS, check_diagnose_argv, diagnose_options
from fp16doctor.report import render_html, render_markdown
from fp16doctor.stacks import stack_names
from fp16doctor.textout.findings import findings_text

ROOT = Path(__file__).resolve().parents[3]
DOCUMENTS = sorted([*ROOT.glob("docs/examples/*/results.json"), *ROOT.glob("tests/data/examples/*.json"),
                    *ROOT.glob("tests/data/cases/*.json")])


def refused(command: str) -> str | None:
    found = check_diagnose_argv(command.split(), known_stacks=stack_names())
    return found.message if found else None


@pytest.mark.parametrize(("command", "message"), [
    ("fp16doctor diagnose --precision float32 --precision float8", "unknown precision 'float8'"),
    ("fp16doctor diagnose --variant padded", "unknown variant 'padded'"),
    ("fp16doctor diagnose --stack tf9-gpu --no-host", "unknown stack 'tf9-gpu'"),
    ("fp16doctor diagnose --docker-host tcp://box:2376 --precision float32", "--docker-host without --stack"),
    ("fp16doctor diagnose --script train.py --variant original --variant channels_padded",
     "--variant channels_padded changes the built-in workload's model or data, not a script's"),
    ("fp16doctor diagnose --steps 20", "--steps and --script-arg apply to your own script"),
    ("fp16doctor diagnose --no-host", "--no-host without --stack leaves nothing to run"),
    ("fp16doctor diagnose --quick --full", "--full and --quick contradict each other"),
    ("fp16doctor diagnose --quick --size full", "--full and --quick contradict each other"),
    ("fp16doctor diagnose --size huge", "unknown size 'huge'"),
    ("fp16doctor diagnose --gres gpu:1", "--gres applies to Slurm jobs"),
    ("fp16doctor diagnose --steps 3 --partition gpu", "--partition applies to Slurm jobs"),  # said first, as ever
    ("fp16doctor diagnose --slurm --stack cpu --docker-host unix:///x.sock", "--docker-host does not combine"),
    ("fp16doctor diagnose --slurm --registry r.example", "--registry runs a stack's container"),
    ("fp16doctor diagnose --slurm --stack cpu --script train.py", "--script with --stack does not run on Slurm"),
    ("fp16doctor diagnose --precision", "--precision needs a value"),
    ("fp16doctor diagnose --plan-everything", "diagnose has no option '--plan-everything'"),
    ("fp16doctor diagnose --slurm --backend jax", "--backend does not combine with it"),
    ("fp16doctor diagnose --variant synthetic_input+float32_batches",
     "synthetic_input and float32_batches both change the batches"),
    ("fp16doctor diagnose --variant xla+xla", "xla+xla names xla twice"),
    ("fp16doctor diagnose --variant original+xla", "original is the workload as written and combines with no change"),
    ("fp16doctor diagnose --variant onednn_off+tf32_off",
     "onednn_off applies on a CPU only and tf32_off on a GPU only"),
    ("fp16doctor diagnose --variant synthetic_input+padded", "unknown variant 'padded'"),
    ("fp16doctor diagnose --script train.py --variant onednn_off+xla", "a script's run takes one change at a time"),
])
def test_what_diagnose_refuses_the_validator_refuses(command: str, message: str) -> None:
    assert message in (refused(command) or "")


@pytest.mark.parametrize("command", [
    "fp16doctor diagnose",
    "fp16doctor diagnose --quick --precision float32 --precision mixed_bfloat16",
    "fp16doctor diagnose -q -p float32 -p float16 -s cpu -o out -v --plan",
    "fp16doctor diagnose --stack cpu --no-host --docker-host tcp://box:2376 --precision float32",
    "fp16doctor diagnose --script train.py --script-arg=--epochs=1 --steps 10 --variant original --variant xla",
    "fp16doctor diagnose --slurm --gres gpu:a100:1 --stack cpu --runtime apptainer",
    "fp16doctor diagnose --backend tensorflow --backend jax --backend torch --size smoke",
    "fp16doctor diagnose --quick --precision float32 --variant synthetic_input --variant synthetic_input+xla",
    "fp16doctor diagnose --variant xla+synthetic_input --variant synthetic_input+channels_padded+xla",
])
def test_what_diagnose_accepts_the_validator_accepts(command: str) -> None:
    assert refused(command) is None


def test_the_validator_knows_every_option_of_diagnose_and_no_other() -> None:
    declared = set()
    for parameter in inspect.signature(cli.diagnose).parameters.values():
        declared.update(n for n in getattr(parameter.default, "param_decls", ()) if n.startswith("-"))
    value_options, flag_options = diagnose_options()
    assert declared | {"--help"} == value_options | flag_options | set(SHORT_OPTIONS)
    assert {"--slurm", "--partition", "--docker-host"} <= declared  # the engines' options, from their declaration


def test_the_check_creates_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert check_diagnose_argv(["fp16doctor", "diagnose", "--out", "new-folder", "--stack", "cpu"]) is None
    assert list(tmp_path.iterdir()) == []


def printed_commands(text: str) -> list[str]:
    """Every `fp16doctor diagnose ...` in a text, as far as its words are diagnose's options and their values."""
    commands, value_options = [], diagnose_options()[0]
    text = re.sub(r"\\([^\w\s])", r"\1", text)  # markdown's backslash escapes
    for match in re.finditer(r"fp16doctor diagnose\b", text):
        words = text[match.end():].split("\n", 1)[0].replace("`", " ").split()
        argv, i = ["fp16doctor", "diagnose"], 0
        while i < len(words):
            word = words[i].rstrip(".,;:)\"'")
            if word in value_options and i + 1 < len(words):
                argv += [word, words[i + 1].rstrip(".,;:)\"'")]
                i += 2
                continue
            if not word.startswith("--"):
                break  # the sentence goes on
            argv.append(word)  # an option diagnose lacks stays in, for the check to refuse
            i += 1
        commands.append(" ".join(argv))
    return commands


def _texts(doc: dict[str, Any]) -> list[str]:
    """What fp16doctor prints of a document: its fresh analysis (explain --json), explain's text, both reports."""
    diagnosis = diagnose_document(doc)
    analysed = {"findings": diagnosis.to_dict()["findings"], "verdicts": diagnosis.to_dict()["verdicts"],
                "prescriptions": diagnosis.to_dict()["prescriptions"]}
    terminal = io.StringIO()  # wide enough that no command wraps
    Console(file=terminal, width=1000, color_system=None).print(findings_text(diagnosis))
    page = re.sub(r"<[^>]+>", " ", render_html([doc]))  # the HTML report as text
    return [*_strings(analysed), terminal.getvalue(), render_markdown([doc]), page]


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return []


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_printed_command_passes_the_check(path: Path) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    commands = [c for text in _texts(doc) for c in printed_commands(html.unescape(text))]
    bad = {c: refused(c) for c in commands if refused(c)}
    assert not bad, bad
