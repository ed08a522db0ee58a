

def test_an_op_outside_the_layers_is_shown_without_tensorflows_function_call_scopes() -> None:
    from fp16doctor.analysis.op_compare import shown_name

    assert shown_name("StatefulPartitionedCall/adam/Square_2") == "adam/Square_2"
    assert shown_name("PartitionedCall_1/StatefulPartitionedCall/Cast_20") == "Cast_20"
    assert shown_name("Iterator::Root::Prefetch") == "Iterator::Root::Prefetch"


def test_a_tables_steps_are_its_verdicts_and_a_cut_runs_are_its_own() -> None:
    """The Xeon example: mixed_bfloat16's table quotes the paired rounds' steps its verdict does; float16, cut inside
    its first step, is compared with float32's first step by its verdict (tracing in both), while its table of ops
    per step keeps float32's own step, as every other line quotes it (its rounds' geometric mean)."""
    import json
    from pathlib import Path

    from fp16doctor.analysis.op_compare import op_comparisons

    doc = json.loads((Path(__file__).resolve().parents[3] / "docs" / "examples" / "cpu-xeon-amx-quick"
                      / "results.json").read_text(encoding="utf-8"))
    tables = {c.precision: c for c in op_comparisons(doc) if c.variant == "original"}
    verdicts = {v["precision"]: v for v in doc["verdicts"] if v["variant"] == "original"}
    bf16, fp16 = tables["mixed_bfloat16"], tables["float16"]
    assert (round(bf16.step_ms, 3), round(bf16.fp32_step_ms, 3)) == (
        verdicts["mixed_bfloat16"]["step_ms"], verdicts["mixed_bfloat16"]["fp32_step_ms"])
    fp32 = next(r for r in doc["runs"] if r["precision"] == "float32" and r["variant"] == "original")
    from fp16doctor.analysis.intervals import rounds_step_ms

    own = rounds_step_ms(fp32["step_time_ms"]["rounds"])
    assert fp16.bound and fp16.fp32_step_ms == own != verdicts["float16"]["fp32_step_ms"]
