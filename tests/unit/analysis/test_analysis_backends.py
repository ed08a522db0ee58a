"""Keras backends as host stacks: the recorded H200 diagnosis (Keras 3 on torch) beside the seed model's Keras 3 steps
on JAX on the same machine (bare-keras-jax.json: batches on the device, one process each), so the prescription can say
what another backend is worth, and never prescribes one that did not run. A run's own process is timed with `fit()`,
so JAX's rows enter as their `fit_ms` (40.5 ms for float32), and the torch stack's in-memory float32 as its own
process measured it (108.8 ms; its interleaved rounds, 83 ms, paired only with its own stack's runs)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from fp16doctor.analysis import diagnose_document
from fp16doctor.analysis.user_changes import BACKEND_MIN_SPEEDUP
from fp16doctor.analysis.words import change_words

EXAMPLE = Path(__file__).resolve().parents[3] / "docs" / "examples" / "gpu-h200-keras-torch-full"


def _jax_runs(torch_run: dict[str, Any], *, failed: bool = False) -> list[dict[str, Any]]:
    """The JAX steps as host-jax runs of the in-memory variant, with the torch run's machine, device and Keras."""
    bare = json.loads((EXAMPLE / "bare-keras-jax.json").read_text(encoding="utf-8"))
    runs = []
    for row in bare:
        if row.get("tool") != "keras-jax":
            continue
        run: dict[str, Any] = {
            "stack": "host-jax", "precision": row["precision"], "variant": "synthetic_input",
            "machine": torch_run["machine"], "device": torch_run["device"],
            "software": {**torch_run["software"], "keras_backend": "jax", "jax": "0.11.2"},
            "workload": {**torch_run["workload"]},
        }
        run["software"].pop("torch", None)
        if failed:
            run.update(status="failed", error="ImportError: jax was built without CUDA")
        else:
            run.update(status="ok", step_time_ms={"median": round(row["fit_ms"], 3)})
        runs.append(run)
    return runs


@pytest.fixture()
def with_jax(h200_doc: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(h200_doc)
    for key in ("findings", "verdicts", "prescriptions", "stack_comparisons"):
        doc.pop(key, None)
    torch_fp32 = next(r for r in doc["runs"] if r["stack"] == "host" and r["precision"] == "float32"
                      and r["variant"] == "synthetic_input" and not r.get("experiment"))
    doc["runs"] += _jax_runs(torch_fp32)
    return doc


def _host_prescription(doc: dict[str, Any]) -> dict[str, Any]:
    return next(p for p in diagnose_document(doc).to_dict()["prescriptions"] if p["stack"] == "host")


def test_a_backend_measured_much_faster_is_a_user_change_with_its_command_and_cost(with_jax: dict[str, Any]) -> None:
    prescription = _host_prescription(with_jax)
    change = next(c for c in prescription["user_changes"] if c["kind"] == "backend")
    assert change["backend"] == "jax" and change["measured_by"] == "host-jax"
    # torch's in-memory float32 step in its own process (108.8 ms) against JAX's (40.5 ms): about 2.7x.
    assert 2.5 <= change["speedup"] <= 2.9
    assert change["speedup_interval"][0] >= BACKEND_MIN_SPEEDUP
    assert "KERAS_BACKEND=jax" in change["how"] and "dependency" in change["cost"]
    # What the 16-bit types did on JAX against JAX's own float32 comes with it: float16 17.4 ms, about 2.3x.
    on_jax = {m["precision"]: m for m in change["in_memory"]}
    assert on_jax["float16"]["outcome"] == "faster"
    assert "backend jax" in change_words(change) and "float32 with batches in memory" in change_words(change)
    # The input pipeline (3.7x) is still the largest change, said first; the backend follows it, then what nobody
    # measured against the GPU's idle time with batches in memory (compiled execution, the batch's bytes).
    assert [c["kind"] for c in prescription["user_changes"]] == ["input_pipeline", "backend", "compiled",
                                                                 "batch_bytes"]


def test_the_backend_leads_the_headline_where_it_is_the_largest_change(with_jax: dict[str, Any]) -> None:
    # Without the in-memory control of the torch stack's pipeline, the backend is the only change measured.
    doc = copy.deepcopy(with_jax)
    jax = [r for r in doc["runs"] if r["stack"] == "host-jax"]
    doc["runs"] = [r for r in doc["runs"] if r["variant"] == "original" and r["stack"] == "host"] + [
        {**r, "variant": "original"} for r in jax]
    prescription = _host_prescription(doc)
    assert [c["kind"] for c in prescription["user_changes"]] == ["backend"]
    assert prescription["headline"].startswith("Switch Keras to the jax backend on host first")


def test_a_backend_whose_runs_failed_is_never_prescribed(h200_doc: dict[str, Any]) -> None:
    doc = copy.deepcopy(h200_doc)
    torch_fp32 = next(r for r in doc["runs"] if r["stack"] == "host" and r["precision"] == "float32"
                      and r["variant"] == "synthetic_input" and not r.get("experiment"))
    doc["runs"] += _jax_runs(torch_fp32, failed=True)
    prescription = _host_prescription(doc)
    assert all(c["kind"] != "backend" for c in prescription["user_changes"])
    assert "jax" not in prescription["headline"]


def test_a_backend_not_clearly_faster_is_not_prescribed(with_jax: dict[str, Any]) -> None:
    # JAX's float32 at 85 ms against torch's 108.8 ms: faster, but under 1.5x.
    for run in with_jax["runs"]:
        if run["stack"] == "host-jax":
            run["step_time_ms"] = {"median": 85.0}
    prescription = _host_prescription(with_jax)
    assert all(c["kind"] != "backend" for c in prescription["user_changes"])


def test_an_untested_idea_on_another_backend_is_measured_by_a_command_diagnose_accepts(
        with_jax: dict[str, Any]) -> None:
    from fp16doctor.invocation import check_diagnose_argv

    doc = copy.deepcopy(with_jax)
    doc["invocation"] = {**doc.get("invocation", {}),
                         "argv": ["fp16doctor", "diagnose", "--backend", "torch", "--backend", "jax"]}
    for run in [r for r in doc["runs"] if r["stack"] == "host-jax"]:
        run["engine"] = {"kind": "host", "rerun": ["--backend", "jax"]}
        doc["runs"].append({**run, "variant": "original"})
    jax, = [p for p in diagnose_document(doc).to_dict()["prescriptions"] if p["stack"] == "host-jax"]
    commands = [u["command"] for u in jax["untested"] if u.get("command")]
    assert commands, jax["untested"]
    for command in commands:
        words = command.split()
        assert "--stack" not in words and words.count("--backend") == 1 and "--backend jax" in command
        assert check_diagnose_argv(words) is None
