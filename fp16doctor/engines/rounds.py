"""How an interleaved rounds process's record enters the runs it timed (which rounds processes run, and what they
cost, is the rounds phase's: diagnose/rounds.py).

A rounds process times each configuration of one comparison group in rounds, each round in a new order
(workload/rounds.py); its rounds replace each run's step statistics, and what the run's own process measured stays
under `single_process`. Configurations it timed with no process of their own get records made from it.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from fp16doctor.engines.spec import RunSpec, WorkloadSize, rounds_label, rounds_setting
from fp16doctor.results import Run
from fp16doctor.workload.paired import MIN_ROUNDS, processes_of_rounds
from fp16doctor.workload.protocol import AA_CONTROL

# A configuration's rounds and its own process more than this factor apart: said, since both timed one model.
DISAGREEMENT = 1.5
# How long rounds go on once the minimum is done: the full size's; a budgeted size's host rounds get what its
# budget has left (diagnose), at least ROUNDS_MIN_BUDGET_S; a container stack's, the minimum (its containers
# already cost more than the budget).
FULL_ROUNDS_BUDGET_S = 60.0
ROUNDS_MIN_BUDGET_S = 5.0


def stack_rounds_budget_s(size: WorkloadSize) -> float:
    """The rounds budget of a container stack's comparison group."""
    return ROUNDS_MIN_BUDGET_S if size.budget_s is not None else FULL_ROUNDS_BUDGET_S


def _stats(values: list[float]) -> dict[str, float]:
    """Median, p10 and p90 of at least MIN_ROUNDS values, interpolated between closest ranks as the workload's
    own step statistics are."""
    deciles = statistics.quantiles(values, n=10, method="inclusive")
    return {"median": round(statistics.median(values), 3), "p10": round(deciles[0], 3), "p90": round(deciles[-1], 3)}


def _values(rounds: Mapping[str, Any], label: str) -> list[float]:
    return [float(v) for v in rounds.get(label) or [] if isinstance(v, (int, float))]


def _label(run: Run) -> str:
    """A run's configuration in its rounds process (spec.rounds_label)."""
    return rounds_label(run.precision, run.variant)


def _rounds_step(rounds: Mapping[str, Any], precision: str, group: int) -> dict[str, Any] | None:
    """One configuration's step statistics from its rounds (None with fewer than MIN_ROUNDS), float32's with its
    A/A control, and the rounds process that timed them (`group`: rounds pair only within one)."""
    values = _values(rounds, precision)
    if len(values) < MIN_ROUNDS:
        return None
    step: dict[str, Any] = {**_stats(values), "n": len(values), "rounds": values, "design": "interleaved",
                            "group": group}
    aa = _values(rounds, AA_CONTROL)
    if precision == "float32" and len(aa) >= MIN_ROUNDS:
        step["aa_rounds"] = aa
    return step


def _rounds_groups(step: Mapping[str, Any]) -> list[Any]:
    """Each round's rounds process (`round_groups`, else the step's `group` for every round)."""
    return processes_of_rounds(len(step.get("rounds") or []), step.get("round_groups"), step.get("group"))


def _add_process(step: Mapping[str, Any], rounds: Mapping[str, Any], label: str, group: int
                 ) -> dict[str, Any] | None:
    """A step already timed in rounds with the rounds of one more process added (another process repeating the
    same configurations, `repeat_of`): its rounds, each round's process (`round_groups`), the A/A control's and the
    statistics over them all; None where that process timed it fewer than MIN_ROUNDS times."""
    values = _values(rounds, label)
    if len(values) < MIN_ROUNDS:
        return None
    merged: dict[str, Any] = dict(step)
    merged["rounds"] = [*step.get("rounds", []), *values]
    merged["round_groups"] = [*_rounds_groups(step), *[group] * len(values)]
    aa = _values(rounds, AA_CONTROL)
    if "aa_rounds" in step:
        if len(aa) == len(values):  # one per round, as float32's own: they pair round by round
            merged["aa_rounds"] = [*step["aa_rounds"], *aa]
        else:  # the control no longer follows float32's rounds: it pairs with none of them
            merged.pop("aa_rounds")
    merged.update(_stats(merged["rounds"]), n=len(merged["rounds"]))
    single = step.get("single_process")
    if isinstance(single, Mapping) and isinstance(single.get("median"), (int, float)) and single["median"] > 0:
        merged["rounds_vs_single_process"] = round(merged["median"] / float(single["median"]), 4)
    return merged


def merge_rounds(runs: list[dict[str, Any]], record: Mapping[str, Any], group: int = 0,
                 repeat_of: int | None = None) -> dict[str, Any] | None:
    """Put the rounds into the runs they timed (same stack and setting); returns what the document keeps of the
    rounds process itself (order, blocks, the A/A control), or None when it failed. `group` numbers the rounds
    process in the document (its index in `timing_rounds`). With `repeat_of`, the process repeated that group's
    configurations in a fresh process: its rounds are added to the runs that group timed (those made from it
    included), each round keeping its process (`round_groups`), so the analysis can tell the variation between
    processes from the variation inside one."""
    rounds = record.get("rounds")
    if record.get("status") != "ok" or not isinstance(rounds, Mapping):
        return None
    stack, variant = record.get("stack"), record.get("variant", "original")
    if repeat_of is not None:
        for record_ in runs:
            run = Run.of(record_)
            if (run.stack == stack and run.ok and run.timed_in_rounds and run.step_group == repeat_of
                    and (added := _add_process(record_["step_time_ms"], rounds, _label(run), group)) is not None):
                record_["step_time_ms"] = added
        return {**_kept(runs, record, group), "repeat_of": repeat_of}
    for record_ in runs:
        run = Run.of(record_)
        # The runs of its setting, and in the original's a change to a model or its input that ran on its own.
        if (run.stack != stack or rounds_setting(run.variant) != variant or not run.ok
                or run.made_by_rounds):  # made from rounds: no process of its own
            continue
        step = _rounds_step(rounds, _label(run), group)
        if step is None:
            continue
        current = dict(record_.get("step_time_ms") or {})
        # A run timed in rounds before (--resume timed its group again) keeps its own process's figures.
        single = dict(current.get("single_process") or current) if current.get("design") == "interleaved" else current
        single.pop("rounds", None)
        step["single_process"] = single
        if isinstance(single.get("median"), (int, float)) and single["median"] > 0:
            # Two measurements of one configuration on one machine: far apart, one of them timed something else.
            step["rounds_vs_single_process"] = round(step["median"] / float(single["median"]), 4)
        record_["step_time_ms"] = step
    return _kept(runs, record, group)


def _kept(runs: list[dict[str, Any]], record: Mapping[str, Any], group: int) -> dict[str, Any]:
    """What the document keeps of a rounds process (`timing_rounds[]`)."""
    rounds = record.get("rounds")
    rounds = rounds if isinstance(rounds, Mapping) else {}
    stack = record.get("stack")
    kept = {k: record.get(k) for k in ("stack", "order", "block_steps", "stop_reason", "stop_precision", "timing",
                                      "wall_s")}
    # What else used the CPU while they measured (workload/contention.py), and who was timed past the budget.
    kept.update({k: record[k] for k in ("contention", "extended") if record.get(k)})
    kept.update(variant=record.get("variant", "original"), group=group)
    if isinstance(record.get("machine_load"), Mapping):
        kept["machine_load"] = dict(record["machine_load"])  # what else the machine did meanwhile (probe/load.py)
    steps = [(Run.of(run), run.get("step_time_ms") or {}) for run in runs if run.get("stack") == stack]
    kept["disagree"] = sorted(
        _label(run) for run, step in steps if group in [*_rounds_groups(step), step.get("group")]
        and not 1 / DISAGREEMENT <= float(step.get("rounds_vs_single_process") or 1.0) <= DISAGREEMENT)
    kept["precisions"] = [p for p in rounds if p != AA_CONTROL]
    if isinstance(record.get("engine"), Mapping):
        kept["engine"] = dict(record["engine"])  # where the rounds ran: a container's engine and GPU, a job's node
    return kept


def rounds_done_words(record: Mapping[str, Any]) -> str:
    """How many rounds a rounds process timed, in how long, and why it stopped where that was early: "7 rounds in
    38 s, every ratio known to within 5 % either way"."""
    words = f"{len(record.get('order') or [])} rounds in {record.get('wall_s', 0):.0f} s"
    precision = record.get("stop_precision")
    if record.get("stop_reason") == "precision" and isinstance(precision, Mapping) \
            and isinstance(precision.get("target"), (int, float)):
        words += f", every ratio known to within {precision['target'] * 100:.0f} % either way"
    extended = [str(label) for label in record.get("extended") or [] if label not in ("float32", AA_CONTROL)]
    if extended:
        words += f", {', '.join(extended)} timed on past the budget while a comparison was unsettled"
    return words


def take_rounds(doc: dict[str, Any], record: Mapping[str, Any], alone: str, creates: list[RunSpec] | None = None,
                repeat_of: int | None = None) -> tuple[dict[str, Any] | None, list[str], list[dict[str, Any]]]:
    """A rounds process's record into the document: its rounds into the runs they timed and what is kept of it
    into `timing_rounds`; with the notes to show (`alone`: what each ratio rests on when the rounds failed), and
    the records it makes for `creates`, the precisions it timed and profiled with no run of their own (for the
    caller to add; none where the rounds failed). `repeat_of`: the process repeats that group's rounds in a fresh
    process (merge_rounds)."""
    group = len(doc.get("timing_rounds") or [])
    kept = merge_rounds(doc["runs"], record, group=group, repeat_of=repeat_of)
    if kept is None:
        if repeat_of is not None:
            return None, [f"interleaved rounds in a second process failed ({record.get('error', 'no result')}): "
                          "each ratio's interval is the first process's alone (within one process)"], []
        return None, [f"interleaved rounds failed ({record.get('error', 'no result')}): each ratio rests on "
                      f"{alone}"], []
    made = experiment_records(record, [s for s in creates or () if s.stack == record.get("stack")
                                       and s.rounds_setting == record.get("variant", "original")], doc["runs"], group)
    doc.setdefault("timing_rounds", []).append(kept)
    notes = [f"interleaved rounds{' in a second process' if repeat_of is not None else ''}: "
             f"{rounds_done_words(record)}"]
    left_out = record.get("left_out")
    for label, why in (left_out.items() if isinstance(left_out, Mapping) else ()):
        notes.append(f"{label} left out of the interleaved rounds: {why}")
    if kept.get("disagree"):
        notes.append(f"interleaved rounds and their own processes disagree by more than {DISAGREEMENT}x for "
                     f"{', '.join(kept['disagree'])} (step_time_ms.rounds_vs_single_process): check the machine")
    return kept, notes, made


# What an experiment's record takes from the rounds process that timed it: where and on what it ran.
_FROM_ROUNDS = ("stack", "variant", "device", "size", "machine", "engine", "software")
# What a configuration profiled in the rounds process (no run of its own) takes from there: its window's ops (the
# engine attributed them), its model, its input (workload/rounds.py _own_run_fields).
_FROM_OWN_RUN = ("ops", "ops_error", "profile", "model", "input_time_ms", "batch_dtype", "window_step_ms",
                 "variant_applied")


def _made_record(record: Mapping[str, Any], spec: RunSpec, status: str) -> dict[str, Any]:
    """An experiment's record as its setting's rounds process made it: where it ran, what it is, how it ended."""
    made: dict[str, Any] = {k: record[k] for k in _FROM_ROUNDS if k in record}
    made.update(precision=spec.precision, variant=spec.variant, status=status)
    if spec.experiment is not None:
        made["experiment"] = dict(spec.experiment)
    return made


def _first_model_names(fields: dict[str, Any], names: Any) -> dict[str, Any]:
    """A profiled configuration's model and ops with its layers named as in a process of its own (the workload's
    `layer_names`: a rounds process numbers the names of its later models on), so they compare by name with the
    runs that had one."""
    if not isinstance(names, Mapping) or not names:
        return fields
    model, ops = fields.get("model"), fields.get("ops")
    if isinstance(model, Mapping) and isinstance(model.get("layers"), list):
        fields["model"] = {**model, "layers": [
            {**layer, "name": names.get(layer.get("name"), layer.get("name"))} if isinstance(layer, Mapping)
            else layer for layer in model["layers"]]}
    if isinstance(ops, Mapping) and isinstance(ops.get("items"), list):
        fields["ops"] = {**ops, "items": [
            {**item, "layer": names.get(item.get("layer"), item.get("layer"))} if isinstance(item, Mapping)
            else item for item in ops["items"]]}
    return fields


def experiment_records(record: Mapping[str, Any], specs: list[RunSpec], runs: list[Mapping[str, Any]],
                       group: int) -> list[dict[str, Any]]:
    """The configurations a rounds process timed with no process of their own (one setting's experiments, float32
    beside them, and its A/A control; or a precision of the original that the rounds profiled), as run records of
    their own: each its rounds' step statistics, its first step (the warm-up's, tracing included, as a run's own
    first step is timed) and its losses; `timed_by` says it had no process of its own. A profiled one has its
    window's ops, its model and its input time; a change to a model or its input timed in the original's rounds
    (spec.rounds_label) says what it applied, its batches' dtype and whether its model was compiled with XLA; the
    others none of these. The workload's description comes from the original run of its stack. A configuration
    with fewer than MIN_ROUNDS rounds is left out."""
    rounds, warmup = record.get("rounds"), record.get("warmup")
    rounds = rounds if isinstance(rounds, Mapping) else {}
    warmup = warmup if isinstance(warmup, Mapping) else {}
    original = next((r for r in map(Run.of, runs) if r.stack == record.get("stack") and r.original and r.ok), None)
    workload = original.record.get("workload") if original is not None else None
    made = []
    for spec in specs:
        label = spec.rounds_label
        step = _rounds_step(rounds, label, group)
        if step is None:
            continue
        made_one = _made_record(record, spec, "ok")
        made_one.update(step_time_ms=step, timed_by="interleaved_rounds")
        if isinstance(record.get("variant_applied"), Mapping):
            made_one["variant_applied"] = dict(record["variant_applied"])
        first = (warmup.get(label) or {}).get("first_step_ms")
        if isinstance(first, (int, float)):
            made_one["first_step_ms"] = first
        losses = list((record.get("losses") or {}).get(label) or [])
        if losses:
            made_one["loss"] = {"first": losses[0], "last": losses[-1],
                                "nan_or_inf": any(v is None for v in losses)}
        if isinstance(workload, Mapping):
            made_one["workload"] = dict(workload)
        own = (record.get("own_run") or {}).get(label) if isinstance(record.get("own_run"), Mapping) else None
        if isinstance(own, Mapping):
            made_one.update(_first_model_names({k: own[k] for k in _FROM_OWN_RUN if k in own},
                                               own.get("layer_names")))
            if "scale_first" in own and isinstance(made_one.get("loss"), dict):  # a mixed_float16 loss scale
                made_one["loss"].update(scale_first=own["scale_first"], scale_last=own.get("scale_last"))
            if isinstance(made_one.get("workload"), dict) and "jit_compile" in own:  # the changed model's own
                made_one["workload"]["jit_compile"] = own["jit_compile"]
        made.append(made_one)
    return made


def failed_records(record: Mapping[str, Any], specs: list[RunSpec]) -> list[dict[str, Any]]:
    """The records of configurations whose only timing was a rounds process that failed (another Keras backend's:
    no run of their own to fall back on), each with the process's error."""
    error = str(record.get("error") or "the interleaved rounds process failed")
    return [{**_made_record(record, spec, "failed"), "stack": spec.stack, "error": error} for spec in specs]


def take_experiment_rounds(doc: dict[str, Any], record: Mapping[str, Any],
                           specs: list[RunSpec]) -> tuple[list[dict[str, Any]] | None, list[str]]:
    """An experiment setting's rounds process into the document: the records it makes (None where it failed, and
    the experiments then need processes of their own) and what is kept of it into `timing_rounds`; with the notes
    to show."""
    group, setting = len(doc.get("timing_rounds") or []), record.get("variant", "original")
    of = "" if setting == "original" else f" of {setting}"  # another backend's rounds run the original setting
    if record.get("status") == "skipped":  # the setting cannot apply here (the workload says why): nor can its runs
        return [{**_made_record(record, spec, "skipped"), "error": record.get("error")} for spec in specs], []
    if record.get("status") != "ok" or not isinstance(record.get("rounds"), Mapping):
        return None, [f"interleaved rounds{of} failed ({record.get('error', 'no result')})"]
    records = experiment_records(record, specs, doc["runs"], group)
    doc.setdefault("timing_rounds", []).append(_kept(doc["runs"], record, group))
    return records, [f"interleaved rounds{of}: {rounds_done_words(record)}"]
