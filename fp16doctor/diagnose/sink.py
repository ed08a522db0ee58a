"""Where an engine's runs go during a diagnose: each record into results.json as it finishes, the rest to the
display; an interleaved rounds process's record into the runs it timed, or, for a setting's experiments, into
records of their own."""

from __future__ import annotations

from typing import Any

from fp16doctor.engines.spec import HOST_STACK, RunSpec
from fp16doctor.options import Progress
from fp16doctor.results import ResultsWriter


class DocumentSink:
    """An engine's RunSink for diagnose: records go to results.json at once, the rest to the display."""

    def __init__(self, writer: ResultsWriter, progress: Progress, total: int) -> None:
        self.writer = writer
        self.progress = progress
        self.total = total
        self.started = 0

    def runs(self) -> list[dict[str, Any]]:
        return list(self.writer.doc["runs"])

    def note(self, message: str) -> None:
        self.progress.note(message)

    def start_run(self, spec: RunSpec) -> None:
        self.progress.start_run(spec, self.total, self.started)
        self.started += 1

    def event(self, event: dict[str, Any]) -> None:
        self.progress.event(event)

    def finish_run(self, record: dict[str, Any]) -> None:
        self.writer.add_run(record)
        self.progress.finish_run(record)


class RoundsSink(DocumentSink):
    """The rounds process's record goes into the runs it timed (engines/rounds.take_rounds), not in as a run of
    its own; its start shows as a note (the runs' progress counts cells)."""

    def __init__(self, writer: ResultsWriter, progress: Progress, alone: str, measure_load: bool,
                 creates: list[RunSpec] | None = None, makes_all: bool = False,
                 repeat_of: int | None = None) -> None:
        super().__init__(writer, progress, len(creates or ()) or 1)
        self.alone = alone  # where each precision's own figures were timed, as the cross-check names it
        self.measure_load = measure_load  # the engine runs here: this machine's load beside the rounds is theirs
        self.before: Any = None
        # What the rounds time with no process of their own (a setting's experiments, or a precision of the
        # original profiled in the rounds): their records are made from the rounds.
        self.creates = list(creates or ())
        # Every record of the rounds' stack is made from them (another Keras backend's: no run of its own there).
        self.makes_all = makes_all
        self.made = False
        self.repeat_of = repeat_of  # the rounds process (group) this one repeats in a fresh process, if any
        self.rows: dict[tuple[Any, Any], str] = {}  # (stack, setting): the live row of its rounds process

    def start_run(self, spec: RunSpec) -> None:
        # A live row for the rounds process (what it is doing while it runs), ended without a line of its own.
        self.progress.start_run(spec, 1, 0)
        self.rows[(spec.stack, spec.variant)] = spec.label
        if self.measure_load:
            from fp16doctor.probe.load import snapshot

            self.before = snapshot()  # what else ran beside the rounds: the reason a failed A/A control gives

    def finish_run(self, record: dict[str, Any]) -> None:
        from fp16doctor.engines.rounds import take_rounds

        label = self.rows.pop((record.get("stack"), record.get("variant", "original")), None)
        if label is not None:
            self.progress.event({"event": "ended", "run": label})
        if self.before is not None:
            from fp16doctor.probe.load import machine_load, snapshot

            record["machine_load"] = machine_load(self.before, snapshot())
        prefix = "" if record.get("stack") in (None, HOST_STACK) else f"{record.get('stack')}: "
        if self.creates and (self.makes_all or record.get("variant", "original") != "original"):
            self._make_runs(record, prefix)
            return
        kept, notes, made = take_rounds(self.writer.doc, record, alone=self.alone, creates=self.creates,
                                        repeat_of=self.repeat_of)
        if kept is not None:
            self.writer.save()
        for note in notes:
            self.progress.note(prefix + note)
        self._add(made)

    def _add(self, made: list[dict[str, Any]] | None) -> None:
        for run in made or ():
            self.writer.add_run(run)  # saved at once, as every finished run is
            self.progress.finish_run(run)
        self.made = bool(made)

    def _make_runs(self, record: dict[str, Any], prefix: str) -> None:
        from fp16doctor.engines.rounds import take_experiment_rounds

        made, notes = take_experiment_rounds(self.writer.doc, record, self.creates)
        for note in notes:
            self.progress.note(prefix + note)
        self._add(made)
