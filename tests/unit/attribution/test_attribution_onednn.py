"""The oneDNN verbose parser on real output: the recordings (oneDNN 3.7 "v1" lines) and older formats quoted
in public issues (tests/data/public/onednn_verbose_formats.txt, sources inside)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from attribution_data import PUBLIC, XEON, onednn_lines

from fp16doctor.attribution import onednn


def _blocks() -> dict[str, list[str]]:
    blocks: dict[str, list[str]] = {}
    current = None
    for line in (PUBLIC / "onednn_verbose_formats.txt").read_text().splitlines():
        if line.startswith("## "):
            current = blocks.setdefault(line[3:].strip(), [])
        elif current is not None and line and not line.startswith("#"):
            current.append(line)
    return blocks


def test_v1_lines_of_the_xeon_float16_window():
    lines, wall_ms = onednn.window_lines(onednn_lines(XEON, "float16"))
    execs = onednn.parse_lines(lines)
    assert wall_ms == 24473.1
    bwd_w = [e for e in execs if e.primitive == "convolution" and e.prop_kind == "backward_weights"]
    assert len(bwd_w) == 4 and all(e.impl == "ref:any" for e in bwd_w)
    first = next(e for e in bwd_w if "ic3oc32" in e.desc)
    assert first.ms == 10698.8 and first.src_dtype == "float16" and first.pass_hint == "backward_weights"
    assert onednn.desc_fields(first.desc)["oh"] == 112
    # info and template lines are not executions
    assert all(e.primitive != "info" for e in execs)


def test_dnnl_v1_format():
    execs = onednn.parse_lines(_blocks()["dnnl_v1.6"])
    assert len(execs) == 3  # the create:cache_miss line is not an execution
    assert execs[0].impl == "jit:avx512_common" and execs[0].prop_kind == "forward_inference"
    assert execs[0].src_dtype == "float32" and execs[0].ms == 0.988037
    assert onednn.desc_fields(execs[0].desc)["ic"] == 3


def test_onednn_v2_format():
    execs = onednn.parse_lines(_blocks()["onednn_v2"])
    assert [e.primitive for e in execs] == ["inner_product"] * 5
    assert execs[1].impl == "brgemm:avx512_core" and execs[1].ms == 28.6951 and execs[1].desc == "mb200ic15680oc512"


def test_onednn_v3_0_format_skips_check_lines():
    execs = onednn.parse_lines(_blocks()["onednn_v3.0"])
    assert len(execs) == 1
    assert execs[0].impl == "jit:avx2" and execs[0].pass_hint == "forward" and execs[0].ms == 0.0514


def test_mkldnn_v0_format_without_engine_field():
    execs = onednn.parse_lines(_blocks()["mkldnn_v0.16"])
    conv = next(e for e in execs if e.primitive == "convolution")
    assert conv.impl == "gemm:jit" and conv.ms == 40.5582 and conv.pass_hint == "forward"
    assert [e.primitive for e in execs].count("reorder") == 3


def test_timestamped_line_gives_a_start():
    line = ("onednn_verbose,v1,1700000000123.5,primitive,exec,cpu,convolution,ref:any,backward_weights,"
            "src:f16::blocked:acdb::f0,,alg:convolution_direct,mb32_ic3oc32_ih8oh8kh3sh1dh0ph1_iw8ow8kw3sw1dw0pw1,12.5")
    record = onednn.parse_line(line)
    assert record is not None and record.start_ms == 1700000000123.5 and record.ms == 12.5


def test_leading_timestamp_form():
    line = ("1.60704e+12:dnnl_verbose,exec,cpu,reorder,rnn_data_reorder,undef,"
            "src_f32::blocked:abcd:f0 dst_u8::blocked:abcd:f0,,,2x3x224x224,3.3728")
    record = onednn.parse_line(line)
    assert record is not None and record.start_ms == 1.60704e12 and record.pass_hint == "cast"


def test_unreadable_lines_are_skipped():
    assert onednn.parse_line("onednn_verbose,v1,primitive,exec,cpu,convolution,ref:any") is None
    assert onednn.parse_line("Epoch 1/1") is None


CUT = Path(__file__).resolve().parents[2] / "data" / "recordings" / "cpu-epyc-avx2-tf2.21-cut-in-step"


def _cut_recording() -> tuple[list[str], dict]:
    return ((CUT / "float32.bound_step.onednn_verbose.log").read_text().splitlines(),
            json.loads((CUT / "float32.result.json").read_text()))


def test_creation_lines_are_skipped_unless_asked():
    lines, _ = _cut_recording()
    creates = [line for line in lines if ",create:" in line]
    assert creates and all(onednn.parse_line(line) is None for line in creates)
    record = onednn.parse_line(creates[0], creates=True)
    assert record is not None and record.operation == "create" and record.start_ms is not None


def test_the_primitive_created_and_never_executed_before_the_cut_is_in_flight():
    """A real window cut inside its step: conv2d_1's forward convolution was created and never executed before the
    cut; its time runs from its creation's end to the cut."""
    lines, result = _cut_recording()
    cut_at = result["window"]["cut_at_ms"]
    running = onednn.in_flight(lines, cut_at)
    assert [(r.primitive, r.prop_kind, r.impl) for r in running] == [
        ("convolution", "forward_training", "brg_conv_fwd:avx2")]
    last_conv = [line for line in lines if ",create:" in line and ",convolution," in line][-1]
    created = onednn.parse_line(last_conv, creates=True)
    assert created is not None and created.desc == running[0].desc and created.start_ms is not None
    assert running[0].start_ms == created.start_ms + created.ms
    assert running[0].ms == pytest.approx(cut_at - running[0].start_ms)
    assert 0 < running[0].ms < result["window"]["wall_ms"]


def test_a_creation_matched_by_its_execution_is_not_in_flight():
    lines, result = _cut_recording()
    executed = [line for line in lines if ",exec," in line]
    assert executed  # every other primitive of the window ran: it is matched, not running at the cut
    names = {(r.primitive, r.desc) for r in onednn.in_flight(lines, result["window"]["cut_at_ms"])}
    for line in executed:
        record = onednn.parse_line(line)
        assert record is not None and (record.primitive, record.desc) not in names


def test_without_timestamps_nothing_is_bounded():
    lines, result = _cut_recording()
    plain = [re.sub(r"^(onednn_verbose,v1,)[0-9.]+,", r"\1", line) for line in lines]
    assert onednn.in_flight(plain, result["window"]["cut_at_ms"]) == []
