"""The numbers and sentences the report shows, computed from results documents."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from report_helpers import FAKE_FINDINGS, fixed_sources, load_fixture

from fp16doctor.analysis import diagnose_document
from fp16doctor.analysis.registry import REGISTRY
from fp16doctor.report.viewmodel import Sources, build_report


def _machine(doc: dict[str, Any], sources: Sources, index: int = 0):
    return build_report([doc], sources).documents[0].machines[index]


SEED_VERDICT = {
    "machine": "host", "stack": "user", "variant": "original", "precision": "float16", "ratio": 0.625,
    "step_ms": 800.0, "fp32_step_ms": 500.0, "difference_ms": 300.0, "outcome": "slower", "bound": False,
    "cause": "host_fp16_emulation", "basis": "estimate", "explained_share": 0.48, "unexplained_ms": 156.0,
    "causes": [{"id": "host_fp16_emulation", "explains_ms": 144.0, "basis": "estimate"}],
}
# A saved verdict of the contract's short shape has no headline: the report phrases it from its fields (the tests
# below). One the analysis made carries its headline, which the report prints word for word.
HEADLINE = ("float16 is 1.60x slower than float32 on user (800 ms vs 500 ms per step): partly because host-side "
            "preprocessing runs in float16 (estimated: 144 ms of the 300 ms difference); 156 ms (52%) of it is "
            "unexplained")


def test_the_analysis_headline_is_printed_word_for_word(seed_doc):
    verdict = _machine(seed_doc, fixed_sources(verdicts=[dict(SEED_VERDICT, headline=HEADLINE)])).verdicts[0]
    assert verdict.sentence == HEADLINE and verdict.machine == "NVIDIA TITAN V"
    assert verdict.tone == "slower" and verdict.figure == "1.60x slower"


def test_seed_verdict_renders_what_the_analysis_decided(seed_doc):
    machine = _machine(seed_doc, fixed_sources(verdicts=[SEED_VERDICT]))
    [verdict] = machine.verdicts
    assert verdict.tone == "slower"
    assert verdict.speedup == pytest.approx(0.625)
    assert verdict.figure == "1.60x slower"
    assert verdict.cause_id == "host_fp16_emulation" and verdict.basis == "estimate"
    # the cause's title is the finding's (the fixed one here), the basis and the unexplained part as the verdict
    # says; "partly", since the cause accounts for less than half of the difference
    assert verdict.sentence == (
        "float16 is 1.60x slower than float32 (800 ms vs 500 ms per step; stack user), "
        "partly because the host builds float16 batches with emulated numpy arithmetic "
        "(estimated: 144 ms of the 300 ms difference); 156 ms (52%) of it is unexplained"
    )
    assert machine.name == "NVIDIA TITAN V"


def test_verdict_cause_comes_from_the_analysis_not_from_the_findings_rank(seed_doc):
    # The findings rank pure_float16_floatx first; the verdict still names what the analysis named.
    findings = [dict(FAKE_FINDINGS[0], rank=1), dict(FAKE_FINDINGS[1], rank=2)]
    verdict = _machine(seed_doc, fixed_sources(findings=findings, verdicts=[SEED_VERDICT])).verdicts[0]
    assert verdict.cause_id == "host_fp16_emulation"
    assert "floatx" not in verdict.sentence


def test_cause_title_from_the_registry_when_no_finding_names_it(seed_doc):
    verdict = _machine(seed_doc, fixed_sources(findings=[], verdicts=[SEED_VERDICT])).verdicts[0]
    assert "partly because host-side preprocessing runs in float16 (estimated:" in verdict.sentence


def test_cause_title_from_the_finding_of_the_same_run(seed_doc):
    elsewhere = dict(FAKE_FINDINGS[1], title="Elsewhere", machine="gpu-node", stack="user", precision="float16")
    here = dict(FAKE_FINDINGS[1], title="Here", machine="host", stack="user", precision="float16")
    vague = dict(FAKE_FINDINGS[1], title="Vague")
    sources = fixed_sources(findings=[vague, elsewhere, here], verdicts=[SEED_VERDICT])
    assert "partly because here (estimated" in _machine(seed_doc, sources).verdicts[0].sentence


def test_well_explained_verdict_says_nothing_is_unexplained(seed_doc):
    verdict = dict(SEED_VERDICT, explained_share=0.9, unexplained_ms=30.0,
                   causes=[{"id": "host_fp16_emulation", "explains_ms": 270.0, "basis": "measured_ops"}],
                   basis="measured_ops")
    sentence = _machine(seed_doc, fixed_sources(verdicts=[verdict])).verdicts[0].sentence
    assert "mostly because the host builds" in sentence
    assert sentence.endswith("(measured: 270 ms of the 300 ms difference)") and "unexplained" not in sentence


def test_cut_short_verdict_is_a_bound(seed_doc):
    verdict = dict(SEED_VERDICT, bound=True, step_ms=22050.0, fp32_step_ms=126.0, difference_ms=21924.0,
                   ratio=0.0057, explained_share=0.9, unexplained_ms=2000.0)
    view = _machine(seed_doc, fixed_sources(verdicts=[verdict])).verdicts[0]
    assert view.figure == ">= 175x slower"
    assert "float16 is >= 175x slower than float32 (22.1 s vs 126 ms per step; stack user)" in view.sentence


def test_a_saved_documents_findings_are_the_analysis_of_its_runs_never_the_files_own(rich_doc):
    """`report` shows what `explain` says of the same file: the current analysis, never the file's saved findings
    beside fresh verdicts."""
    doc = build_report([rich_doc], Sources()).documents[0]
    assert any(line.startswith("These come from this release's analysis") for line in doc.findings_about)
    assert [f.id for f in doc.findings] == [f["id"] for f in diagnose_document(rich_doc).to_dict()["findings"]]


def test_doc_without_findings_gets_the_analysis(seed_doc, sources):
    doc = build_report([seed_doc], sources).documents[0]
    assert doc.findings_about == ["This results file carried no findings; these come from fp16doctor's analysis of "
                                  "its numbers."]
    assert {f.id for f in doc.findings} == {f["id"] for f in FAKE_FINDINGS}


def test_verdict_without_a_cause_says_nothing_explains_the_difference(seed_doc):
    verdict = dict(SEED_VERDICT, cause=None, basis=None, causes=[], explained_share=0.0, unexplained_ms=300.0)
    machine = _machine(seed_doc, fixed_sources(findings=[], verdicts=[verdict]))
    assert machine.verdicts[0].sentence.endswith("; no finding explains the 300 ms difference")


def test_run_table_derived_numbers(rich_doc, sources):
    rows = {(r.stack, r.precision): r for r in _machine(rich_doc, sources).rows}
    f16 = rows[("tf1.7-cuda9.0", "float16")]
    assert f16.images_per_s == pytest.approx(128 * 1000 / 800)
    assert f16.speedup_vs_fp32 == pytest.approx(500 / 800)
    assert f16.input_share == pytest.approx(0.5)
    assert (f16.p10_ms, f16.p90_ms, f16.first_step_ms) == (760.0, 870.0, 5100.0)
    assert f16.loss_nan is True
    mixed = rows[("tf2.16-cuda12", "mixed_float16")]
    assert mixed.speedup_vs_fp32 == pytest.approx(1.5)  # against the float32 of its own stack


def test_failed_and_skipped_runs_keep_their_error(rich_doc, sources):
    rows = {(r.stack, r.precision): r for r in _machine(rich_doc, sources).rows}
    failed = rows[("tf2.16-cuda12", "float16")]
    skipped = rows[("tf1.7-cuda9.0", "mixed_float16")]
    assert failed.status == "failed" and failed.step_ms is None and failed.speedup_vs_fp32 is None
    assert "out of memory" in (failed.error or "")
    assert skipped.error == "Keras 2.1.5 has no mixed precision policy"


def test_rows_ordered_by_stack_then_precision(rich_doc, sources):
    rows = _machine(rich_doc, sources).rows
    assert [(r.stack, r.precision) for r in rows] == [
        ("tf1.7-cuda9.0", "float32"),
        ("tf1.7-cuda9.0", "float16"),
        ("tf1.7-cuda9.0", "mixed_float16"),
        ("tf2.16-cuda12", "float32"),
        ("tf2.16-cuda12", "float16"),
        ("tf2.16-cuda12", "mixed_float16"),
    ]


def test_minimal_document_with_only_required_keys(sources):
    doc = {
        "schema_version": 1,
        "host": {"gpus": []},
        "runs": [
            {
                "stack": "host",
                "precision": "float32",
                "device": "cpu",
                "status": "ok",
                "step_time_ms": {"median": 10},
            },
            {
                "stack": "host",
                "precision": "mixed_float16",
                "device": "cpu",
                "status": "ok",
                "step_time_ms": {"median": 8},
            },
        ],
    }
    report = build_report([doc], fixed_sources(findings=[]))
    machine = report.documents[0].machines[0]
    assert machine.name == "CPU only (no GPU)"
    assert machine.verdicts[0].tone == "faster"
    sentence = machine.verdicts[0].sentence
    assert "mixed_float16 is 1.25x faster than float32 (8.0 ms vs 10 ms per step)" in sentence
    row = machine.rows[0]
    assert row.images_per_s is None and row.input_share is None and row.first_step_ms is None


def test_no_runs_and_no_baseline(sources):
    empty = build_report([{"schema_version": 1, "host": {"gpus": []}, "runs": []}], sources)
    assert empty.documents[0].machines[0].verdicts[0].tone == "unknown"
    only_fp16 = {
        "schema_version": 1,
        "host": {"gpus": [{"name": "G"}]},
        "runs": [
            {"stack": "host", "precision": "float32", "device": "gpu:0", "status": "failed", "error": "boom"},
            {
                "stack": "host",
                "precision": "float16",
                "device": "gpu:0",
                "status": "ok",
                "step_time_ms": {"median": 5},
            },
        ],
    }
    [verdict] = build_report([only_fp16], sources).documents[0].machines[0].verdicts
    assert verdict.speedup is None and verdict.figure == "no ratio"
    assert "1 of 2 runs did not complete" in verdict.sentence


def test_same_speed_within_five_percent(sources):
    doc = {
        "schema_version": 1,
        "host": {"gpus": [{"name": "G"}]},
        "runs": [
            {
                "stack": "host",
                "precision": "float32",
                "device": "gpu:0",
                "status": "ok",
                "step_time_ms": {"median": 100},
            },
            {
                "stack": "host",
                "precision": "float16",
                "device": "gpu:0",
                "status": "ok",
                "step_time_ms": {"median": 103},
            },
        ],
    }
    verdict = build_report([doc], fixed_sources(findings=[])).documents[0].machines[0].verdicts[0]
    assert verdict.tone == "same" and verdict.figure == "same speed"


def test_cpu_diagnosis(cpu_doc, sources):
    report = build_report([cpu_doc], sources)
    machine = report.documents[0].machines[0]
    assert machine.name == "Example EPYC (CPU only)"
    assert report.documents[0].environment.gpus == []
    assert [v.precision for v in machine.verdicts] == ["float16", "mixed_float16"]
    assert "float16 is 9.6x slower" in machine.verdicts[0].sentence
    assert ("CPU fp16-related flags", "avx2, f16c, avx512_bf16") in report.documents[0].environment.host


def test_remote_docker_engines_are_separate_machines(seed_doc, sources):
    doc = copy.deepcopy(seed_doc)
    remote = []
    for host, gpu in (("tcp://h200-node:2376", "NVIDIA H200"), ("ssh://ops@a100-node", "NVIDIA A100")):
        for run in copy.deepcopy(seed_doc["runs"]):
            run["stack"] = "tf2.16-cuda12"
            run["engine"] = {"kind": "docker", "docker_host": host, "gpu_name": gpu}
            remote.append(run)
    doc["runs"] += remote
    report = build_report([doc], sources)
    names = [m.name for m in report.documents[0].machines]
    assert names == ["NVIDIA TITAN V", "NVIDIA H200", "NVIDIA A100"]
    assert report.is_comparison
    assert report.documents[0].machines[2].facts.startswith("docker ssh://ops@a100-node")


def test_engine_column_only_with_several_engines(rich_doc, sources):
    assert _machine(rich_doc, sources).show_engine is False
    doc = copy.deepcopy(rich_doc)
    doc["runs"][1]["engine"] = {"kind": "docker", "docker_host": "unix:///run/docker-2.sock"}
    machine = _machine(doc, sources)
    assert machine.show_engine is True
    f16 = next(r for r in machine.rows if r.precision == "float16" and r.stack == "tf1.7-cuda9.0")
    # both engines run on this machine's GPU: the analysis pairs them, and the table shows its ratio
    pair = next(r for r in diagnose_document(doc).runs if r.precision == "float16" and r.stack == "tf1.7-cuda9.0")
    assert pair.speedup is not None
    assert f16.speedup_vs_fp32 == pair.speedup and f16.versus_fp32 == pair.versus_fp32


def test_same_gpu_twice_in_a_comparison_is_told_apart(seed_doc, sources):
    report = build_report([seed_doc, copy.deepcopy(seed_doc)], sources)
    assert [m.name for d in report.documents for m in d.machines] == ["NVIDIA TITAN V", "NVIDIA TITAN V (#2)"]


def test_comparison_rows_and_heading_name_both_machines(seed_doc, cpu_doc, sources):
    report = build_report([seed_doc, cpu_doc], sources)
    assert report.heading == "float16 vs float32 on NVIDIA TITAN V and Example EPYC (CPU only)"
    by_machine = {r.machine: r for r in report.comparison}
    assert by_machine["NVIDIA TITAN V"].speedup("float16") == pytest.approx(0.625)
    assert by_machine["Example EPYC (CPU only)"].ms("mixed_float16") == 990.0
    assert report.comparison_precisions == ["float16", "mixed_float16"]
    # one line per verdict, machine by machine: float16 on the TITAN V, float16 and mixed_float16 on the EPYC
    assert [(v.machine, v.precision) for v in report.headline] == [
        ("NVIDIA TITAN V", "float16"),
        ("Example EPYC (CPU only)", "float16"),
        ("Example EPYC (CPU only)", "mixed_float16"),
    ]


def test_comparison_adds_bfloat16_columns_where_measured(seed_doc, sources):
    report = build_report([seed_doc, load_fixture("cpu-xeon-ops")], sources)
    assert report.comparison_precisions == ["float16", "mixed_float16", "mixed_bfloat16"]
    xeon = next(r for r in report.comparison if r.machine.startswith("Example Xeon"))
    assert xeon.speedup("mixed_bfloat16") == pytest.approx(126 / 58)


def test_reproduce_from_recorded_invocation_is_redacted(rich_doc, sources):
    command = build_report([rich_doc], sources).documents[0].reproduce.command
    assert command.startswith("fp16doctor diagnose --stack tf1.7-cuda9.0 --stack tf2.16-cuda12 --full")
    assert "s3cretpassw0rd" not in command and "[REDACTED]" in command


def test_reproduce_without_invocation(seed_doc, sources):
    view = build_report([seed_doc], sources).documents[0].reproduce
    assert view.command == "fp16doctor diagnose --full --precision float32 --precision float16"
    assert any("'user' is not one of fp16doctor's pinned stacks" in n for n in view.notes)
    doc = copy.deepcopy(seed_doc)
    for run in doc["runs"]:
        run["stack"] = "tf1.7-cuda9.0"
    command = build_report([doc], sources).documents[0].reproduce.command
    assert "--stack tf1.7-cuda9.0 --no-host" in command


def test_reproduce_without_a_command_line_names_the_keras_backends_not_stacks(seed_doc, sources):
    doc = copy.deepcopy(seed_doc)
    jax = copy.deepcopy(doc["runs"])
    for run in jax:
        run["stack"] = "host-jax"
    for run in doc["runs"]:
        run["stack"] = "host"
    doc["runs"] += jax
    doc["invocation"] = {"size": "full", "stacks": ["host", "host-jax"], "backends": ["tensorflow", "jax"]}
    view = build_report([doc], sources).documents[0].reproduce
    assert view.command.endswith("--backend tensorflow --backend jax")
    assert "--stack" not in view.command and not any("pinned stacks" in n for n in view.notes)


def test_fix_code_follows_the_stack(rich_doc, sources):
    findings = {f.id: f for f in build_report([rich_doc], sources).documents[0].findings}
    old = findings["host_fp16_emulation"].fix  # the finding names stack tf1.7-cuda9.0
    assert old is not None and old.stack_label == "Keras 2.1.5 / TensorFlow 1.7.0"
    assert "K.set_floatx('float32')" in old.code
    doc = copy.deepcopy(rich_doc)
    doc["findings"][1]["stack"] = "tf2.16-cuda12"
    new = {f.id: f for f in build_report([doc], sources).documents[0].findings}["host_fp16_emulation"].fix
    assert new is not None and "dtype='float32'" in new.code and new.stack_label.startswith("Keras 3.3.3")


def test_finding_may_bring_its_own_fix_code(seed_doc):
    finding = dict(FAKE_FINDINGS[0], fix_code="keras.mixed_precision.set_dtype_policy('mixed_float16')")
    views = build_report([seed_doc], fixed_sources(findings=[finding])).documents[0].findings
    assert views[0].fix is not None and views[0].fix.code.startswith("keras.mixed_precision")


def test_speedup_chart_shows_roofline_prediction(seed_doc):
    report = build_report([seed_doc], fixed_sources(predicted={("user", "float16"): 1.9}))
    charts = report.documents[0].machines[0].charts
    assert charts.speedup_has_prediction
    assert "best case 1.90x faster" in charts.speedup and "measured 1.60x slower" in charts.speedup
    assert "0.62x" not in charts.speedup
    without = build_report([seed_doc], fixed_sources()).documents[0].machines[0].charts
    assert not without.speedup_has_prediction and "best case" not in without.speedup


def test_split_chart_only_when_input_time_measured(seed_doc, rich_doc, sources):
    assert build_report([seed_doc], sources).documents[0].machines[0].charts.split == ""
    split = build_report([rich_doc], sources).documents[0].machines[0].charts.split
    assert "50 % input" in split and "12 % input" in split


def test_real_analysis_plugs_in(seed_doc):
    """With the real analysis and roofline (whatever they find), the report still builds and says why."""
    report = build_report([seed_doc])
    doc = report.documents[0]
    [verdict] = doc.machines[0].verdicts
    assert verdict.speedup == pytest.approx(0.625) and verdict.tone == "slower"
    assert doc.findings_about and "findings" in doc.findings_about[0]
    # whatever it names, the cause is a finding that can cause a speed difference, and the sentence says so
    assert verdict.cause_id is None or REGISTRY[verdict.cause_id].causes_speed
    if verdict.cause_id is not None:
        assert "ly because" in verdict.sentence  # mostly or partly, as the cause's share says


def test_analysis_rank_wins_over_severity(seed_doc):
    findings = [
        dict(FAKE_FINDINGS[1], rank=2),  # critical, but the analysis ranks it second
        dict(FAKE_FINDINGS[0], rank=1),
    ]
    report = build_report([seed_doc], fixed_sources(findings=findings))
    assert [f.id for f in report.documents[0].findings] == ["pure_float16_floatx", "host_fp16_emulation"]


def test_recommendation_code_blocks_are_kept_apart_and_replace_the_table_snippet(seed_doc):
    finding = dict(
        FAKE_FINDINGS[0],
        stacks=["user"],
        recommendation="Set floatx back to float32, then:\n    from tensorflow.keras import mixed_precision\n"
        "    mixed_precision.set_global_policy('mixed_float16')\n(needs TF >= 2.4).",
    )
    view = build_report([seed_doc], fixed_sources(findings=[finding])).documents[0].findings[0]
    assert [(p.kind, p.text) for p in view.recommendation_parts] == [
        ("text", "Set floatx back to float32, then:"),
        (
            "code",
            "from tensorflow.keras import mixed_precision\nmixed_precision.set_global_policy('mixed_float16')",
        ),
        ("text", "(needs TF >= 2.4)."),
    ]
    assert view.recommendation == "Set floatx back to float32, then: (needs TF >= 2.4)."
    assert view.fix is None


def test_finding_stacks_list_picks_the_fix_flavour(rich_doc, sources):
    doc = copy.deepcopy(rich_doc)
    doc["findings"][1].pop("stack")
    doc["findings"][1]["stacks"] = ["tf2.16-cuda12"]
    fix = {f.id: f for f in build_report([doc], sources).documents[0].findings}["host_fp16_emulation"].fix
    assert fix is not None and fix.stack_label == "Keras 3.3.3 / TensorFlow 2.16.1"


def test_reproduce_from_recorded_matrix_when_argv_is_not_a_diagnose_command(seed_doc, sources):
    doc = copy.deepcopy(seed_doc)
    doc["invocation"] = {
        "argv": ["fp16doctor"],
        "size": "quick",
        "stacks": ["cpu"],
        "precisions": ["float32", "mixed_float16"],
        "docker_hosts": ["ssh://ops:pw123456@node"],
    }
    view = build_report([doc], sources).documents[0].reproduce
    assert view.command == (
        "fp16doctor diagnose --quick --stack cpu --no-host --precision float32 --precision mixed_float16 "
        "--docker-host 'ssh://ops:[REDACTED]@node'"
    )


def test_faster_verdict_names_what_saved_the_time():
    doc = {
        "schema_version": 1,
        "host": {"gpus": [{"name": "G"}]},
        "runs": [
            {"stack": "host", "precision": p, "device": "gpu:0", "status": "ok", "step_time_ms": {"median": m}}
            for p, m in (("float32", 300), ("float16", 200))
        ],
    }
    faster = {"machine": "host", "stack": "host", "variant": "original", "precision": "float16", "ratio": 1.5,
              "step_ms": 200.0, "fp32_step_ms": 300.0, "difference_ms": -100.0, "outcome": "faster",
              "cause": "fast_16bit_kernels", "basis": "measured_ops", "explained_share": 0.8, "unexplained_ms": 20.0,
              "causes": [{"id": "fast_16bit_kernels", "explains_ms": 80.0, "basis": "measured_ops"}]}
    limit = {"id": "input_pipeline_bound", "title": "Input pipeline dominates", "severity": "warning"}
    verdict = build_report([doc], fixed_sources(findings=[limit], verdicts=[faster])).documents[0].machines[0]
    assert verdict.verdicts[0].sentence == (
        "float16 is 1.50x faster than float32 (200 ms vs 300 ms per step), mostly because 16-bit kernels "
        "saved time (measured: 80 ms of the 100 ms difference)"
    )
    assert verdict.verdicts[0].tone == "faster" and verdict.verdicts[0].figure == "1.50x faster"


def test_verdict_claims_no_difference_inside_the_measured_spread():
    # 12 % slower, but each run's p10-p90 spans about +-12 %: the findings call that noise, so must the verdict.
    doc = {
        "schema_version": 1,
        "host": {"gpus": [{"name": "G"}]},
        "runs": [
            {"stack": "host", "precision": p, "device": "gpu:0", "status": "ok",
             "step_time_ms": {"median": median, "p10": median * 0.88, "p90": median * 1.12, "n": 20}}
            for p, median in (("float32", 100.0), ("mixed_float16", 112.0))
        ],
    }
    verdict = build_report([doc], fixed_sources(findings=[])).documents[0].machines[0].verdicts[0]
    assert verdict.tone == "same" and "no faster or slower than float32" in verdict.sentence
    assert "inside the runs' spread" in verdict.sentence and "because" not in verdict.sentence
    # With a tight spread the same medians are a real difference.
    for run in doc["runs"]:
        step = run["step_time_ms"]
        step["p10"], step["p90"] = step["median"] * 0.99, step["median"] * 1.01
    verdict = build_report([doc], fixed_sources(findings=[])).documents[0].machines[0].verdicts[0]
    assert verdict.tone == "slower" and verdict.figure == "1.12x slower"


def test_slow_first_steps_are_not_named_the_cause_of_a_slower_median():
    # The medians leave the warm-up out, so a slow first step cannot be why float16's median is slower.
    doc = {
        "schema_version": 1,
        "host": {"gpus": [{"name": "G"}]},
        "runs": [
            {"stack": "host", "precision": p, "device": "gpu:0", "status": "ok", "first_step_ms": first,
             "step_time_ms": {"median": median, "p10": median * 0.99, "p90": median * 1.01, "n": 20}}
            for p, median, first in (("float32", 100.0, 5000.0), ("float16", 160.0, 9000.0))
        ],
    }
    warmup = {"id": "measurement_warmup", "title": "The first steps are much slower than the rest",
              "severity": "info", "confidence": 0.8, "evidence": ["first step 9000 ms"], "recommendation": "x"}
    verdict = build_report([doc], fixed_sources(findings=[warmup])).documents[0].machines[0].verdicts[0]
    assert verdict.tone == "slower" and verdict.cause_id != "measurement_warmup"
    assert "first steps" not in verdict.sentence


def test_the_split_charts_legend_names_every_colour_it_draws(rich_doc, sources):
    import re

    doc = copy.deepcopy(rich_doc)
    doc["runs"].append({"stack": "tf2.16-cuda12", "precision": "mixed_bfloat16", "device": "gpu:0", "status": "ok",
                        "step_time_ms": {"median": 150.0}, "input_time_ms": {"median": 20.0}})
    machine = build_report([doc], sources).documents[0].machines[0]
    drawn = set(re.findall(r'class="bar ([\w-]+)"', str(machine.charts.split)))
    legend = {entry.css_class: entry.label for entry in machine.charts.split_legend}
    assert drawn and drawn <= set(legend), (drawn, legend)
    assert all(label.strip() for label in legend.values())
    assert "mixed_bfloat16" in legend["p-mixed_bfloat16"] and legend["input"] == "host input"


def test_the_speedup_charts_legend_names_every_colour_it_draws(rich_doc, tmp_path):
    import re

    from fp16doctor.report import write_report

    write_report([rich_doc], tmp_path / "report.html", "html")
    html = (tmp_path / "report.html").read_text()
    start = html.index("Speedup over float32")
    svg_end = html.index("</svg>", start)
    legend = html[svg_end:html.index("</p>", svg_end)]
    drawn = set(re.findall(r'class="bar ([\w-]+)"', html[start:svg_end]))
    named = set(re.findall(r'class="swatch ([\w-]+)"', legend))
    assert drawn and drawn <= named, (drawn, named)


def test_every_machine_shows_its_own_cpu_and_gpu() -> None:
    # The host and a remote engine's machine, each with its hardware in the document (`host`, `machines`).
    def run(precision: str, ms: float, machine: str) -> dict[str, Any]:
        engine = {"kind": "docker", "docker_host": "ssh://xeon-box"} if machine != "host" else {"kind": "host"}
        return {"stack": "cpu", "precision": precision, "device": "cpu", "status": "ok", "machine": machine,
                "engine": engine, "step_time_ms": {"median": ms, "p10": ms * 0.98, "p90": ms * 1.02}}

    doc = {"schema_version": 1,
           "host": {"cpu": {"model": "AMD EPYC 9B14", "flags": ["avx2"]}, "gpus": [], "os": "Linux 6.1"},
           "machines": {"xeon-box": {"cpu": {"model": "Intel Xeon Platinum 8480+", "flags": ["amx_bf16"]},
                                     "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3",
                                               "compute_capability": "9.0"}], "os": "Ubuntu 22.04"}},
           "runs": [run("float32", 100, "host"), run("float16", 300, "host"),
                    run("float32", 50, "xeon-box"), run("float16", 40, "xeon-box")]}
    machines = build_report([doc], fixed_sources()).documents[0].machines
    by_name = {m.name: m.facts for m in machines}
    assert "AMD EPYC 9B14 (CPU only)" in by_name
    remote = by_name["NVIDIA H100 80GB HBM3"]
    assert "Intel Xeon Platinum 8480+" in remote and "compute capability 9.0" in remote and "Ubuntu 22.04" in remote


def test_a_stacks_own_description_stands_beside_its_software(rich_doc, sources):
    # A CPU twin must say in the report what it is (not the question's GPU stack), in the catalogue's words.
    from fp16doctor.report.html import render_view
    from fp16doctor.report.markdown import markdown_from_view

    doc = copy.deepcopy(rich_doc)
    words = "CPU twin of the question's first half, on Python 2.7.18"
    stack = doc["runs"][0]["stack"]
    for run in doc["runs"]:
        if run["stack"] == stack:
            run["engine"] = {**(run.get("engine") or {}), "kind": "docker", "stack_description": words}
    report = build_report([doc], sources)
    rows = [sw for sw in report.documents[0].environment.software if sw.stack == stack]
    assert rows and all(sw.description == words for sw in rows)
    assert all(sw.description == "" for sw in report.documents[0].environment.software if sw.stack != stack)
    assert words.replace("'", "&#39;") in render_view(report)
    assert f"{stack} ({words})" in markdown_from_view(report).replace("\\", "")


def test_reproduce_names_the_smoke_size_by_its_option(seed_doc, sources):
    doc = copy.deepcopy(seed_doc)
    doc["invocation"] = {"size": "smoke"}
    command = build_report([doc], sources).documents[0].reproduce.command
    assert command.startswith("fp16doctor diagnose --size smoke ")
