"""The one phraser (analysis/advice.py, held by hold.hold_advice): every what-to-do sentence is written from the
machine's own measured table, so no finding recommends what that machine measured slower than its prescription,
calls a measured configuration untested, or borrows another machine's advice; and a saved document's findings are
the current analysis', never mixed with what the file saved.

Each defect test is a small hand-made document; the last tests walk every results document in the repository."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from fp16doctor.analysis import diagnose_document, saved_diagnosis
from fp16doctor.analysis.advice import prescription_pointer
from fp16doctor.analysis.context import build_context
from fp16doctor.analysis.fixes import fix_for
from fp16doctor.analysis.op_compare import comparisons_of
from fp16doctor.analysis.registry import REGISTRY
from fp16doctor.analysis.values import fmt_config, fmt_ms, place_words

ROOT = Path(__file__).resolve().parents[3]
KERAS3 = {"tensorflow": "2.21.0", "keras": "3.15.1", "keras_backend": "tensorflow"}
EPYC_BF16 = ["avx2", "f16c", "fma", "avx512f", "avx512_bf16"]
EPYC_AVX2 = ["avx2", "f16c", "fma"]
CONFIG_KINDS = ("configuration", "setting", "memory_only", "numerics_only")


def run(precision: str, ms: float, machine: str = "host", stack: str = "host", device: str = "cpu",
        software: Mapping[str, str] = KERAS3, **extra: Any) -> dict[str, Any]:
    return {"stack": stack, "precision": precision, "variant": "original", "device": device, "status": "ok",
            "machine": machine, "software": dict(software),
            "step_time_ms": {"median": ms, "p10": ms * 0.98, "p90": ms * 1.02, "n": 20}, **extra}


def conv(ms: float, dtype: str, impl: str) -> dict[str, Any]:
    return {"name": "conv2d/Conv2D", "layer": "conv2d", "pass": "forward", "dtype": dtype, "impl": impl,
            "tensor_cores": None, "ms_per_step": ms, "calls_per_step": 1, "op_type": "Conv2D"}


def cpu_doc(*runs: dict[str, Any], flags: list[str] = EPYC_BF16) -> dict[str, Any]:
    return {"schema_version": 1, "host": {"cpu": {"model": "AMD EPYC", "flags": flags}, "gpus": []},
            "runs": list(runs)}


def found(findings: list[dict[str, Any]], fid: str) -> dict[str, Any]:
    hits = [f for f in findings if f["id"] == fid]
    assert hits, [f["id"] for f in findings]
    return hits[0]


def test_slow_16bit_compute_quotes_the_measured_faster_mixed_bfloat16_instead_of_float32() -> None:
    """Was: "Train in float32 on this device" beside a prescription of mixed_bfloat16, measured faster."""
    doc = cpu_doc(run("float32", 100.0, ops={"source": "onednn_verbose", "items": [conv(40.0, "float32",
                                                                                        "brg_conv_fwd:avx512")]}),
                  run("float16", 300.0, ops={"source": "onednn_verbose", "items": [conv(240.0, "float16",
                                                                                        "jit:avx512_core")]}),
                  run("mixed_bfloat16", 55.0))
    diagnosis = diagnose_document(doc)
    slow = found(diagnosis.to_dict()["findings"], "slow_16bit_compute")
    assert "float32" not in slow["recommendation"].split(".")[0]
    assert "Train in float32" not in slow["recommendation"]
    # The fix points at the prescription, which says it once.
    assert slow["recommendation"].startswith(prescription_pointer(""))
    assert diagnosis.to_dict()["prescriptions"][0]["headline"].startswith("Use mixed_bfloat16: 1.8")
    assert slow["recommends"]["precision"] == "mixed_bfloat16" and slow["recommends"]["measured_speedup"] > 1.7


def test_no_fast_fp16_hardware_never_calls_a_measured_bfloat16_untested_nor_says_float32() -> None:
    """Was: "On this CPU train in float32. Its bfloat16 units may pay off instead: untested until measured" under a
    document that measured mixed_bfloat16 faster."""
    diagnosis = diagnose_document(cpu_doc(run("float32", 100.0), run("float16", 900.0),
                                          run("mixed_bfloat16", 52.0)))
    fact = found(diagnosis.to_dict()["findings"], "no_fast_fp16_hardware")
    assert "untested" not in fact["recommendation"].lower()
    assert "train in float32" not in fact["recommendation"].lower()
    assert fact["recommends"]["precision"] == "mixed_bfloat16"
    assert fact["instead_of"]["precision"] == "float32"  # what it set aside, with the time float32 took
    assert "float32 took 100 ms per step" in fact["recommendation"]


def test_an_unmeasured_bfloat16_is_pointed_to_the_machines_untested_entry() -> None:
    diagnosis = diagnose_document(cpu_doc(run("float32", 100.0), run("float16", 900.0)))
    fact = found(diagnosis.to_dict()["findings"], "no_fast_fp16_hardware")
    (prescription,) = diagnosis.to_dict()["prescriptions"]
    idea = next(i for i in prescription["untested"] if i["precision"] == "mixed_bfloat16")
    assert f"`{idea['command']}` measures it" in fact["recommendation"]
    assert fact["recommends"]["precision"] == "float32"


@pytest.mark.parametrize("fid", ["pure_float16_floatx", "numerics_unstable"])
def test_a_mixed_float16_measured_slower_than_the_prescription_shows_no_code_for_it(fid: str) -> None:
    """Was: "Not for speed on host: mixed_float16 measured 156x slower ..." and then its set_dtype_policy block."""
    nan = {"first": 0.69, "last": None, "nan_or_inf": True}
    doc = cpu_doc(run("float32", 100.0, loss={"first": 0.69, "last": 0.5, "nan_or_inf": False}),
                  run("float16", 15600.0, loss=nan), run("mixed_float16", 15000.0))
    finding = found(diagnose_document(doc).to_dict()["findings"], fid)
    assert "set_dtype_policy('mixed_float16')" not in finding["recommendation"]
    assert "mixed_float16" in finding["recommendation"] and "slower than float32" in finding["recommendation"]
    assert fix_for(finding, KERAS3) is None  # nor a snippet from the fallback table
    assert finding["recommends"]["precision"] == "float32" and finding["instead_of"]["precision"] == "mixed_float16"


P100 = {"index": 0, "name": "Tesla P100-PCIE-16GB", "compute_capability": "6.0"}


def p100_doc() -> dict[str, Any]:
    """float32 160 ms, mixed_float16 100 ms (the prescription, 1.60x); pure float16 faster still but its loss
    went non-finite, so casts look expensive and the prescription is mixed_float16."""
    return {"schema_version": 1, "host": {"cpu": {"flags": EPYC_AVX2}, "gpus": [P100]},
            "runs": [run("float32", 160.0, device="gpu:0"), run("mixed_float16", 100.0, device="gpu:0"),
                     run("float16", 80.0, device="gpu:0", loss={"first": 0.7, "last": None, "nan_or_inf": True})]}


def test_p100_no_tensor_cores_quotes_the_prescription_and_labels_the_fp32_compute_switch_untested() -> None:
    """Was: "keep float32" and `export TF_FP16_CONV_USE_FP32_COMPUTE=0` with no untested label and no command."""
    diagnosis = diagnose_document(p100_doc())
    (prescription,) = diagnosis.to_dict()["prescriptions"]
    assert prescription["recommended"]["precision"] == "mixed_float16"
    finding = found(diagnosis.to_dict()["findings"], "no_tensor_cores")
    assert finding["recommends"]["precision"] == "mixed_float16"
    assert "keep float32" not in finding["recommendation"]
    assert "export TF_FP16" not in finding["recommendation"]
    switch = next(i for i in prescription["untested"] if "TF_FP16_CONV_USE_FP32_COMPUTE=0" in str(i["setting"]))
    assert switch["command"] is None and "no fp16doctor variant" in switch["no_command"]
    assert "Untested, and fp16doctor cannot measure it" in finding["recommendation"]


def test_p100_cast_overhead_offers_only_what_is_measured_or_labelled_untested() -> None:
    """Was: jit_compile and steps_per_execution as if measured, under a prescription of mixed_float16."""
    diagnosis = diagnose_document(p100_doc())
    (prescription,) = diagnosis.to_dict()["prescriptions"]
    casts = found(diagnosis.to_dict()["findings"], "cast_overhead")
    assert "steps_per_execution" not in casts["recommendation"]
    xla = next(i for i in prescription["untested"] if i["variant"] == "xla")
    assert f"`{xla['command']}` measures it" in casts["recommendation"]
    batch = next(i for i in prescription["untested"] if i["setting"] == "a larger batch")
    assert batch["command"] is None and batch["no_command"]


def test_two_machines_with_one_stack_name_each_get_their_own_advice() -> None:
    """Was: the first prescription of the stack for every machine (an EPYC quoting the Xeon's mixed_bfloat16)."""
    doc = {"schema_version": 1, "host": {"cpu": {"flags": EPYC_AVX2}, "gpus": []},
           "machines": {"xeon": {"cpu": {"model": "Xeon", "flags": EPYC_BF16}},
                        "epyc": {"cpu": {"model": "EPYC", "flags": EPYC_AVX2}}},
           "runs": [run("float32", 100.0, "xeon", "cpu"), run("float16", 900.0, "xeon", "cpu"),
                    run("mixed_bfloat16", 52.0, "xeon", "cpu"),
                    run("float32", 90.0, "epyc", "cpu"), run("float16", 200.0, "epyc", "cpu")]}
    diagnosis = diagnose_document(doc)
    fact = found(diagnosis.to_dict()["findings"], "no_fast_fp16_hardware")
    sentences = fact["recommendation"].splitlines()
    epyc = [s for s in sentences if "cpu on epyc" in s]
    xeon = [s for s in sentences if "cpu on xeon" in s]
    assert epyc and xeon
    assert not any("mixed_bfloat16" in s for s in epyc)
    assert any(prescription_pointer("cpu on xeon") in s for s in xeon)
    assert [p["headline"].startswith("Use mixed_bfloat16 on cpu on xeon") for p in diagnosis.to_dict()["prescriptions"]
            if p["machine"] == "xeon"] == [True]
    assert {(m["machine"], m["recommends"]["precision"]) for m in fact["remedy"]["machines"]} == {
        ("xeon", "mixed_bfloat16"), ("epyc", "float32")}
    # Evidence names the machine of each pair it quotes.
    pairs = [line for line in fact["evidence"] if "vs float32" in line]
    assert pairs and all(" on cpu on " in line for line in pairs)


def test_a_saved_documents_findings_never_mix_with_fresh_verdicts() -> None:
    """Was: `report` rendered the file's own (old) findings beside the verdicts the current release computes."""
    doc = cpu_doc(run("float32", 100.0), run("float16", 900.0), run("mixed_bfloat16", 52.0))
    doc["tool"] = {"name": "fp16doctor", "version": "0.0.1"}
    doc["findings"] = [{"id": "no_fast_fp16_hardware", "title": "old", "severity": "critical", "confidence": 0.9,
                        "evidence": ["565 ms measured"], "recommendation": "On this CPU train in float32."}]
    saved, fresh = saved_diagnosis(doc), diagnose_document(doc)
    assert saved.to_dict()["findings"] == fresh.to_dict()["findings"] and saved.findings_source == "analysis"
    assert [f.to_dict() for f in saved.saved_findings] == doc["findings"] and saved.saved_by == "0.0.1"
    assert not any("On this CPU train in float32" in str(f.get("recommendation")) for f in saved.to_dict()["findings"])


def test_a_preflight_refusal_is_data_that_every_analysis_says_again() -> None:
    """Was: diagnose appended its pre-flight finding to the file only, so `explain` and `report` lost it."""
    doc = cpu_doc(run("float32", 100.0), run("float16", 900.0))
    doc["preflight"] = [{"stack": "tf1.7-cuda9.0", "ok": False, "alternatives": ["tf2.16-cuda12"], "forced": False,
                         "reasons": ["CUDA 9.0 has machine code up to compute capability 7.0; the H100 is 9.0"]}]
    for diagnosis in (diagnose_document(doc), saved_diagnosis(doc)):
        finding = found(diagnosis.to_dict()["findings"], "stack_incompatible_gpu")
        assert any("CUDA 9.0 has machine code" in e for e in finding["evidence"])
        assert "tf2.16-cuda12" in finding["recommendation"] and "tf1.7-cuda9.0" in finding["stacks"]


# ---------------------------------------------------------------------------------------- every document


def _results_documents() -> Iterator[Path]:
    yield from sorted((ROOT / "docs" / "examples").glob("*/results.json"))
    for path in sorted((ROOT / "tests" / "data").rglob("*.json")):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("runs"), list) and "host" in doc:
            yield path


DOCUMENTS = list(_results_documents())


def test_the_walk_finds_the_examples_the_cases_and_the_recordings() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in DOCUMENTS}
    assert any(n.startswith("docs/examples/") for n in names)
    assert any(n.startswith("tests/data/cases/") for n in names)
    assert "tests/data/recordings/cpu-xeon-quick-diagnose/first-run.results.json" in names


def _measured(prescription: Mapping[str, Any]) -> dict[tuple[str, str], Mapping[str, Any]]:
    return {(str(m["precision"]), str(m["variant"])): m for m in prescription["measured"]}


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_advice_contradicts_its_machines_measured_table(path: Path) -> None:
    diagnosis = diagnose_document(json.loads(path.read_text(encoding="utf-8")))
    by_where = {(p["machine"], p["stack"]): p for p in diagnosis.to_dict()["prescriptions"]}
    many = len({(r.machine, r.stack) for r in diagnosis.runs}) > 1  # one place is said once, not in each sentence
    for finding in diagnosis.to_dict()["findings"]:
        spec = REGISTRY.get(str(finding["id"]))
        remedy = finding.get("remedy") or {}
        text = str(finding.get("recommendation") or "")
        if spec is not None and spec.remedy in CONFIG_KINDS and any(
                (m["machine"], m["stack"]) in by_where for m in remedy.get("machines", [])):
            assert finding.get("recommends"), finding["id"]
        for there in remedy.get("machines", []):
            prescription = by_where.get((there["machine"], there["stack"]))
            if prescription is None:
                continue
            chosen = prescription["recommended"]
            measured = _measured(prescription)
            steer = there.get("recommends")
            if spec is not None and spec.remedy in CONFIG_KINDS:  # it points at the prescription of that machine
                where = place_words(there["machine"], there["stack"]) if many else ""
                assert prescription_pointer(where) in text, (finding["id"], there)
                assert prescription["headline"] not in text, (finding["id"], there)  # said once, in its place
            if steer is not None:
                entry = measured.get((steer["precision"], steer["variant"]))
                if entry is not None:  # recommended and measured: never slower than the prescription
                    assert float(entry["speedup"]) >= float(chosen["speedup"]) - 1e-9, (finding["id"], steer)
                    assert steer["measured_speedup"] == entry["speedup"]
                else:  # recommended and not measured: listed untested on that machine
                    assert any((i["precision"], i.get("variant") or "original") ==
                               (steer["precision"], steer["variant"]) for i in prescription["untested"])
        # No sentence calls a measured configuration untested.
        for label in re.findall(r"Untested on [^:]+?(?:, and fp16doctor cannot measure it \(.*?\))?: (.+?) \(",
                                text):
            for prescription in by_where.values():
                if f"on {prescription['stack']}" in text:
                    assert label not in {fmt_config(m) for m in prescription["measured"]}, (finding["id"], label)
        # No code block for a configuration its machine measured slower than the prescription.
        for prescription in by_where.values():
            for (precision, _), entry in _measured(prescription).items():
                if precision == "float32" or float(entry["speedup"]) >= float(prescription["recommended"]["speedup"]):
                    continue
                for code in (f"set_dtype_policy('{precision}')", f"set_global_policy('{precision}')"):
                    assert code not in text, (finding["id"], code)


EXAMPLES = sorted((ROOT / "docs" / "examples").glob("*/results.json"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.parent.name)
def test_report_and_explain_give_the_same_findings_on_every_example(path: Path) -> None:
    """`explain` (diagnose_document) and `report` (saved_diagnosis, what the report renders) on the same file:
    the same findings in content, whatever findings the file itself saved."""
    from fp16doctor.report.viewmodel import build_report

    doc = json.loads(path.read_text(encoding="utf-8"))

    def content(findings: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return [(f["id"], f.get("basis"), f.get("explains_ms"), f.get("recommendation")) for f in findings]

    explained = diagnose_document(doc).to_dict()["findings"]
    assert content(saved_diagnosis(doc).to_dict()["findings"]) == content(explained)
    shown = build_report([doc]).documents[0]
    assert shown.findings_about and "analysis" in shown.findings_about[0]  # never the file's own, unsaid
    assert sorted(v.id for v in shown.findings) == sorted(f["id"] for f in explained)


def test_the_report_says_whose_findings_it_set_aside_and_shows_none_of_them() -> None:
    from fp16doctor.report.html import render_view
    from fp16doctor.report.viewmodel import build_report

    doc = cpu_doc(run("float32", 100.0), run("float16", 900.0), run("mixed_bfloat16", 52.0))
    doc["tool"] = {"name": "fp16doctor", "version": "0.0.1"}
    doc["findings"] = [{"id": "no_fast_fp16_hardware", "title": "old", "severity": "critical", "confidence": 0.9,
                        "evidence": ["565 ms measured"], "recommendation": "On this CPU train in float32."}]
    html = render_view(build_report([doc]))
    shown = html.split('<script type="application/json"')[0]  # the file itself is embedded after, as data
    assert "written by fp16doctor 0.0.1 and are not shown" in shown
    assert "On this CPU train in float32" not in shown and "565 ms measured" not in shown


def _in_rounds(rounds: list[float], **extra: Any) -> dict[str, Any]:
    """A step timed in interleaved rounds whose median (the middle round) is not their geometric mean."""
    return {"median": sorted(rounds)[len(rounds) // 2], "p10": min(rounds), "p90": max(rounds), "n": 30,
            "rounds": rounds, "design": "interleaved", "group": 0, **extra}


def test_a_recommendation_quotes_the_steps_its_verdict_does() -> None:
    """Was: the verdict said float32 151 ms and mixed_float16 821 ms (the paired rounds' geometric means) while
    `no_fast_fp16_hardware` said "float32 took 149 ms per step" and the advice on mixed_float16 "815 ms" (the
    rounds' medians): two figures for one step."""
    fp32 = [140.0, 149.0, 150.0, 152.0, 175.0]
    ops = {"float32": {"source": "tf_profiler", "items": [conv(60.0, "float32", "Conv2DBackpropFilter")]},
           "float16": {"source": "tf_profiler", "items": [conv(600.0, "float16", "Conv2DBackpropFilter")]}}
    runs = [run("float32", 0.0, step_time_ms=_in_rounds(fp32, aa_rounds=[141.0, 148.0, 151.0, 153.0, 176.0]),
                ops=ops["float32"]),
            run("float16", 0.0, step_time_ms=_in_rounds([760.0, 790.0, 800.0, 805.0, 960.0]), ops=ops["float16"]),
            run("mixed_float16", 0.0, step_time_ms=_in_rounds([780.0, 800.0, 815.0, 820.0, 900.0])),
            run("mixed_bfloat16", 0.0, step_time_ms=_in_rounds([78.0, 80.0, 81.0, 83.0, 99.0]))]
    diagnosis = diagnose_document(cpu_doc(*runs))
    verdicts = {v["precision"]: v for v in diagnosis.to_dict()["verdicts"]}
    steps = {p: v["step_ms"] for p, v in verdicts.items()} | {"float32": verdicts["float16"]["fp32_step_ms"]}
    assert round(steps["float32"]) == 153 and sorted(fp32)[2] == 150  # the two statistics differ here
    prescription, = diagnosis.to_dict()["prescriptions"]
    assert prescription["recommended"]["precision"] == "mixed_bfloat16"
    assert prescription["recommended"]["step_ms"] == pytest.approx(steps["mixed_bfloat16"])
    for entry in prescription["measured"]:
        assert entry["step_ms"] == pytest.approx(steps[entry["precision"]]), entry["precision"]
    said = " ".join(f.get("recommendation") or "" for f in diagnosis.to_dict()["findings"])
    quoted = set(re.findall(r"([\d.]+ ms) per step", said))
    assert f"float32 took {fmt_ms(steps['float32'])} per step" in said, said
    assert quoted <= {fmt_ms(v) for v in steps.values()}, said
    # "Where the time went" heads its table with the same two steps.
    table, = comparisons_of(build_context(cpu_doc(*runs)))
    assert (table.step_ms, table.fp32_step_ms) == pytest.approx((steps["float16"], steps["float32"]), rel=1e-5)
