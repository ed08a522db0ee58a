"""Any optional key may be missing or odd: the report renders, never crashes."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from report_helpers import fixed_sources

from fp16doctor.report.html import render_view
from fp16doctor.report.markdown import markdown_from_view
from fp16doctor.report.viewmodel import build_report

json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-10, 10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
)
json_value = st.recursive(
    json_leaf,
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=8,
)
optional_run_keys = st.fixed_dictionaries(
    {},
    optional={
        "variant": st.one_of(st.sampled_from(["original", "synthetic_input"]), json_value),
        "error": json_value,
        "engine": json_value,
        "software": st.one_of(
            json_value,
            st.fixed_dictionaries(
                {},
                optional={
                    "keras": st.sampled_from(["2.1.5", "3.3.3", "x"]),
                    "tensorflow": st.sampled_from(["1.7.0", "2.16.1"]),
                },
            ),
        ),
        "workload": st.one_of(
            json_value,
            st.fixed_dictionaries(
                {},
                optional={
                    "batch_size": st.one_of(st.integers(-5, 512), json_leaf),
                    "image_height": json_leaf,
                    "image_width": json_leaf,
                },
            ),
        ),
        "step_time_ms": st.one_of(
            json_value,
            st.fixed_dictionaries(
                {"median": st.floats(0.01, 1e5)},
                optional={
                    "p10": json_leaf,
                    "p90": json_leaf,
                    "n": json_leaf,
                },
            ),
        ),
        "first_step_ms": json_leaf,
        "input_time_ms": st.one_of(json_value, st.fixed_dictionaries({"median": json_leaf})),
        "gpu_utilization_pct": json_value,
        "loss": json_value,
    },
)


finding = st.fixed_dictionaries(
    {},
    optional={
        key: json_value if key in ("evidence", "stacks") else json_leaf
        for key in (
            "id",
            "title",
            "severity",
            "confidence",
            "evidence",
            "recommendation",
            "rank",
            "stack",
            "stacks",
            "fix_code",
        )
    },
)


@st.composite
def documents(draw: st.DrawFn) -> dict[str, Any]:
    runs = []
    for _ in range(draw(st.integers(0, 5))):
        run = {
            "stack": draw(st.sampled_from(["host", "cpu", "tf1.7-cuda9.0", "<b>x</b>"])),
            "precision": draw(st.sampled_from(["float32", "float16", "mixed_float16"])),
            "device": draw(st.sampled_from(["cpu", "gpu:0"])),
            "status": draw(st.sampled_from(["ok", "failed", "skipped"])),
        }
        run.update(draw(optional_run_keys))
        runs.append(run)
    gpu = st.fixed_dictionaries(
        {"name": st.text(max_size=20)},
        optional={
            "compute_capability": json_leaf,
            "memory_total_mib": json_leaf,
            "driver_version": json_leaf,
        },
    )
    host = draw(
        st.fixed_dictionaries({"gpus": st.lists(gpu, max_size=2)}, optional={"cpu": json_value, "os": json_value})
    )
    doc: dict[str, Any] = {"schema_version": 1, "host": host, "runs": runs}
    for key in ("invocation", "tool", "created", "note", "findings"):
        if draw(st.booleans()):
            doc[key] = draw(json_value)
    if draw(st.booleans()):
        doc["findings"] = draw(st.lists(finding, max_size=3))
    return doc


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(documents(), min_size=1, max_size=3))
def test_any_document_renders(docs):
    view = build_report(docs, fixed_sources(findings=[]))
    page = render_view(view)
    assert page.startswith("<!DOCTYPE html>") and 'id="fp16doctor-results"' in page
    assert markdown_from_view(view).startswith("## ")


def test_ticks_of_a_tiny_maximum_are_not_all_zero() -> None:
    """Hypothesis found it: a hand-written step of 1.5e-293 ms made every tick 0 and the chart divide by it."""
    from fp16doctor.report.charts import nice_ticks

    ticks = nice_ticks(1.5e-293)
    assert ticks[0] == 0 and ticks[-1] >= 1.5e-293 and len(ticks) >= 2
    assert nice_ticks(0.3) == [0.0, 0.1, 0.2, 0.3]
