"""Helpers for the report tests: results documents on disk, hostile input and fixed analysis sources."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from fp16doctor.analysis import Diagnosis, saved_diagnosis
from fp16doctor.analysis.finding import Finding
from fp16doctor.analysis.fixes import attach_fixes
from fp16doctor.analysis.verdict import Verdict
from fp16doctor.analysis.verdicts import complete_saved
from fp16doctor.report.viewmodel import Sources

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent.parent
FIXTURES = HERE / "fixtures"
SEED = TESTS / "data" / "examples" / "seed-titanv-tf1.7.json"
GOLDEN = TESTS / "data" / "golden"

HOSTILE_SCRIPT = "<script>alert(1)</script>"
HOSTILE_ATTR = "\"'><img src=x onerror=alert(1)>"

# Findings shaped like fp16doctor.analysis's, fixed so the report tests do not move with the rules.
FAKE_FINDINGS = [
    {
        "id": "pure_float16_floatx",
        "title": "Pure float16 via keras.json floatx keeps weights and optimizer state in fp16",
        "severity": "warning",
        "confidence": 0.9,
        "evidence": ["floatx=float16: float16 step 800 ms vs float32 500 ms"],
        "recommendation": "Set floatx back to float32 and use mixed precision where the stack offers it.",
    },
    {
        "id": "host_fp16_emulation",
        "title": "The host builds float16 batches with emulated numpy arithmetic",
        "severity": "critical",
        "confidence": 0.7,
        "evidence": ["Keras 2.1.5 ImageDataGenerator builds batches in K.floatx()"],
        "recommendation": "Keep the input pipeline in float32.",
    },
]


def fixed_sources(
    findings: list[dict[str, Any]] | None = None,
    predicted: dict[tuple[str, str], float] | None = None,
    known: set[str] | None = None,
    verdicts: list[dict[str, Any]] | None = None,
) -> Sources:
    """Fixed findings standing in for the analysis' (given, else the document's own as a test wrote them, else
    FAKE_FINDINGS); the verdicts and prescriptions are the analysis' own of the document's runs (verdicts unless
    given), since the report only renders them."""

    def diagnose(doc: dict[str, Any]) -> Diagnosis:
        real = saved_diagnosis(doc)
        if real.findings_source == "results":  # a file with no runs: its own findings are all there is
            return replace(real, verdicts=tuple(Verdict.of(complete_saved(v, real.to_dict()["findings"]))
                                                for v in copy.deepcopy(verdicts))) \
                if verdicts is not None else real
        chosen = verdicts if verdicts is not None else real.to_dict()["verdicts"]
        saved = doc.get("findings")
        own = [f for f in saved if isinstance(f, dict)] if isinstance(saved, list) else []
        fixed = copy.deepcopy(findings if findings is not None else own or FAKE_FINDINGS)
        # Verdicts given here are phrased as the analysis phrases saved ones; its own are already.
        judged = tuple(Verdict.of(complete_saved(v, fixed)) for v in copy.deepcopy(chosen))
        attach_fixes(fixed, real.runs, judged)  # each finding's code for its stack, as the analysis chooses it
        return replace(real, findings=tuple(Finding.of(f) for f in fixed), verdicts=judged,
                       findings_source="analysis" if fixed else "none", saved_findings=())

    return Sources(
        diagnose=diagnose,
        roofline=lambda doc: dict(predicted or {}),
        known_stacks=lambda: set(known) if known is not None else {"cpu", "tf1.7-cuda9.0", "tf2.16-cuda12"},
    )


def load_fixture(name: str) -> dict[str, Any]:
    path = SEED if name == "seed" else FIXTURES / f"{name}.json"
    return json.loads(path.read_text(encoding="utf-8"))


def hostile_doc() -> dict[str, Any]:
    """A results file written to attack whoever opens its report."""
    doc = load_fixture("seed")
    doc["host"]["gpus"][0]["name"] = HOSTILE_SCRIPT
    doc["runs"][0]["stack"] = HOSTILE_ATTR
    doc["runs"][1]["stack"] = HOSTILE_ATTR
    doc["runs"].append(
        {
            "stack": HOSTILE_ATTR,
            "precision": "mixed_float16",
            "device": "gpu:0",
            "status": "failed",
            "error": "</script><script>document.title='pwned'</script>" + HOSTILE_SCRIPT,
        }
    )
    doc["note"] = "<!-- " + HOSTILE_ATTR
    doc["findings"] = [
        {
            "id": HOSTILE_ATTR,
            "title": HOSTILE_SCRIPT,
            "severity": "critical",
            "confidence": 1.0,
            "evidence": [HOSTILE_ATTR, "</script><script>document.title='pwned'</script>"],
            "recommendation": "<style>body{display:none}</style>",
        }
    ]
    return doc
