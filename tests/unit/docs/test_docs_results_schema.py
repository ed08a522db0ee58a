"""docs/results.schema.json: every results document in the repository validates against it (examples, the
documents their reports embed, test fixtures, hand-written cases), and the documents the contract forbids are
rejected. What `diagnose` writes afresh is validated in tests/unit/cli/test_cli_diagnose_files.py."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from fp16doctor.results import load_all, validate
from fp16doctor.workload.protocol import PRECISIONS

ROOT = Path(__file__).resolve().parents[3]
SCHEMA_PATH = ROOT / "docs" / "results.schema.json"


def _schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def schema_errors(doc: Any) -> list[str]:
    validator = jsonschema.Draft202012Validator(_schema())
    return [f"{e.json_path}: {e.message}" for e in validator.iter_errors(doc)]


def _results_documents() -> list[Path]:
    """Every JSON file in the repository whose top level says it is a results document."""
    found = []
    for path in sorted([*ROOT.glob("docs/**/*.json"), *ROOT.glob("tests/**/*.json")]):
        if path == SCHEMA_PATH:
            continue
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            continue
        if isinstance(doc, dict) and "schema_version" in doc:
            found.append(path)
    return found


DOCUMENTS = _results_documents()
REPORTS = sorted(ROOT.glob("docs/examples/*/report.html"))


def test_the_schema_is_a_valid_json_schema_and_names_the_precisions_of_the_protocol() -> None:
    schema = _schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert tuple(schema["$defs"]["precision"]["enum"]) == PRECISIONS


def test_the_repository_holds_the_documents_it_should() -> None:
    # A glob that silently matched nothing would make the parametrised tests below pass vacuously.
    names = {p.relative_to(ROOT).as_posix() for p in DOCUMENTS}
    assert "tests/data/examples/seed-titanv-tf1.7.json" in names
    assert sum(n.startswith("docs/examples/") for n in names) >= 5
    assert sum(n.startswith("tests/data/cases/") for n in names) >= 10
    assert len(REPORTS) >= 5


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_results_document_in_the_repository_validates(path: Path) -> None:
    assert schema_errors(json.loads(path.read_text(encoding="utf-8"))) == []


@pytest.mark.parametrize("path", REPORTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_the_documents_a_report_embeds_validate(path: Path) -> None:
    docs = load_all(path)
    assert docs and all(schema_errors(doc) == [] for doc in docs)


MINIMAL = {
    "schema_version": 1,
    "host": {"gpus": [{"name": "NVIDIA TITAN V", "compute_capability": "7.0"}]},
    "runs": [{"stack": "host", "precision": "float16", "device": "gpu:0", "status": "ok",
              "step_time_ms": {"median": 800.0}}],
}


def _without(doc: dict[str, Any], *path: str | int) -> dict[str, Any]:
    changed = copy.deepcopy(doc)
    *parents, last = path
    target: Any = changed
    for key in parents:
        target = target[key]
    del target[last]
    return changed


def _with(doc: dict[str, Any], value: Any, *path: str | int) -> dict[str, Any]:
    changed = copy.deepcopy(doc)
    *parents, last = path
    target: Any = changed
    for key in parents:
        target = target[key]
    target[last] = value
    return changed


def test_the_smallest_document_the_contract_allows_validates_with_fields_added_by_later_work() -> None:
    assert schema_errors(MINIMAL) == []
    grown = _with(MINIMAL, [{"machine": "host", "precision": "float16", "ratio": 0.4,
                             "ratio_interval": [0.0, 0.4], "interval_method": "lower_bound",
                             "confidence_level": None,
                             "likely_cause": {"id": "no_fast_fp16_hardware", "basis": "device_fact", "why": "..."}}],
                  "verdicts")
    grown = _with(grown, {"name": "seed_cnn", "mode": "generator"}, "runs", 0, "workload")
    grown = _with(grown, [{"from": "tf1.7-cpu", "to": "cpu", "changes": []}], "stack_comparisons")
    grown = _with(grown, {"runs_on": "anything"}, "a_field_nobody_has_named_yet")
    assert schema_errors(grown) == []


REJECTED = {
    "no schema_version": _without(MINIMAL, "schema_version"),
    "schema_version 2": _with(MINIMAL, 2, "schema_version"),
    "no host": _without(MINIMAL, "host"),
    "no host.gpus": _without(MINIMAL, "host", "gpus"),
    "a GPU without a name": _without(MINIMAL, "host", "gpus", 0, "name"),
    "compute capability as a number": _with(MINIMAL, 7.0, "host", "gpus", 0, "compute_capability"),
    "no runs": _without(MINIMAL, "runs"),
    "an unknown precision": _with(MINIMAL, "float8", "runs", 0, "precision"),
    "an unknown status": _with(MINIMAL, "done", "runs", 0, "status"),
    "a run without a device": _without(MINIMAL, "runs", 0, "device"),
    "status ok without step_time_ms": _without(MINIMAL, "runs", 0, "step_time_ms"),
    "a zero median": _with(MINIMAL, {"median": 0}, "runs", 0, "step_time_ms"),
    "a median as text": _with(MINIMAL, {"median": "800"}, "runs", 0, "step_time_ms"),
    "findings not a list": _with(MINIMAL, {"id": "old_stack"}, "findings"),
    "an unknown severity": _with(MINIMAL, [{"id": "old_stack", "severity": "fatal"}], "findings"),
}


@pytest.mark.parametrize("doc", REJECTED.values(), ids=REJECTED.keys())
def test_documents_the_contract_forbids_are_rejected_by_the_schema_and_by_explain(doc: dict[str, Any]) -> None:
    assert schema_errors(doc) != []
    # The schema and the loader `explain` uses agree on what a results document is.
    if doc.get("findings") is None or isinstance(doc["findings"], dict):
        from fp16doctor.errors import DoctorError

        with pytest.raises(DoctorError):
            validate(doc)


def test_a_failed_run_needs_no_step_time() -> None:
    failed = _with(_without(MINIMAL, "runs", 0, "step_time_ms"), "failed", "runs", 0, "status")
    assert schema_errors(failed) == []
