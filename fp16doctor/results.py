"""results.json: the contract other programs rely on (schema_version 1, see docs/results-schema.md).

Documents stay plain JSON-shaped dicts so that a hand-written file, a colleague's file and ours are
treated alike; this module owns loading, checking and writing them.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import math
import os
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from fp16doctor import __version__
from fp16doctor.errors import EXIT_USAGE, DoctorError
from fp16doctor.redaction import redact, redact_home_paths
from fp16doctor.workload.protocol import PADDED_CHANNELS, PRECISIONS, VARIANT_ENV, is_16bit, variant_parts

SCHEMA_VERSION = 1
REDUCED_PRECISIONS = tuple(p for p in PRECISIONS if is_16bit(p))  # the 16-bit ones, each compared with float32
# What each experiment variant changes, and nothing else (a run's `experiment.changes`).
VARIANT_CHANGES: dict[str, dict[str, Any]] = {
    "onednn_off": {"env": dict(VARIANT_ENV["onednn_off"])},
    "float32_batches": {"batch_dtype": "float32"},  # the ImageDataGenerator's batches; the model stays 16-bit
    "channels_padded": {"input_channels": PADDED_CHANNELS},  # zero channels added in the model for the first conv
    "tf32_off": {"env": dict(VARIANT_ENV["tf32_off"])},
    "xla": {"jit_compile": True},
}


def experiment_changes(variant: str) -> dict[str, Any] | None:
    """What a variant changes against the configuration it is compared with (protocol.variant_base): its last
    change's VARIANT_CHANGES ("synthetic_input+xla": jit_compile=True, against batches in memory); None where that
    change is a control (synthetic_input) or there is none."""
    parts = variant_parts(variant)
    return dict(VARIANT_CHANGES[parts[-1]]) if parts and parts[-1] in VARIANT_CHANGES else None


RUN_STATUSES = ("ok", "failed", "skipped")
# What a size's timings are not (invocation.size): said beside its prescription and when the diagnose starts.
SIZE_CAVEATS = {"smoke": "the smoke size checks that everything runs; its steps are too small to say how training "
                         "at a real size goes (diagnose with --quick or --full before acting on it)"}
SEVERITIES = ("info", "warning", "critical")
# runs[].ops.coverage below this: the listed ops leave much of the window unattributed, and reports say so.
LOW_COVERAGE = 0.7

Document = dict[str, Any]
RunRecord = dict[str, Any]  # one of a document's `runs`, as JSON has it; `Run.of` reads it


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_document(host: dict[str, Any]) -> Document:
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "fp16doctor", "version": __version__},
        "created": utc_now(),
        "host": host,
        "runs": [],
        "findings": [],
    }


def run_key(run: RunRecord) -> tuple[str, str, str]:
    """What identifies one cell of the stack x precision x variant matrix."""
    return Run.of(run).key


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class Run:
    """One run record as the host side reads it (diagnose, the engines' rounds, results), made once from the record
    (`Run.of`): the cell, how it ended, its step statistics and where it ran. The record itself stays the document's
    (`record`), JSON-shaped, for what no field names; the analysis reads its own view (analysis/context.py RunView)."""

    record: Mapping[str, Any] = field(repr=False, compare=False)
    stack: str
    precision: str
    variant: str
    status: str
    device: str = ""
    machine: str | None = None
    step_median_ms: float | None = None
    step_p10_ms: float | None = None
    step_p90_ms: float | None = None
    step_n: int | None = None
    # How its steps were timed: "interleaved" where rounds replaced its own process's statistics; the rounds
    # process that timed them (`step_time_ms.group`, timing_rounds[].group).
    step_design: str | None = None
    step_group: Any = None
    first_step_ms: float | None = None
    input_median_ms: float | None = None
    bound: bool = False  # cut short by the slow-step bound: its step is a lower bound
    timed_by: str | None = None  # "interleaved_rounds": made from a rounds process, no process of its own
    keras_backend: str | None = None  # software.keras_backend: the backend it ran on
    engine: Mapping[str, Any] = field(default_factory=dict)
    experiment: Mapping[str, Any] | None = None
    import_s: float | None = None  # timing.import_s: the framework's import in its process
    wall_s: float | None = None
    attribution_s: float | None = None  # profile.attribution_s: reading and attributing its window here
    workload: Mapping[str, Any] = field(default_factory=dict)
    size: str | None = None  # the workload size it ran at (quick, full, smoke)

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> Run:
        step = _mapping(record.get("step_time_ms"))
        n = _number(step.get("n"))
        experiment = record.get("experiment")
        return cls(
            record=record, stack=str(record.get("stack")), precision=str(record.get("precision")),
            variant=str(record.get("variant", "original")), status=str(record.get("status")),
            device=str(record.get("device") or ""), machine=_text(record.get("machine")),
            step_median_ms=_number(step.get("median")), step_p10_ms=_number(step.get("p10")),
            step_p90_ms=_number(step.get("p90")), step_n=int(n) if n is not None and math.isfinite(n) else None,
            step_design=_text(step.get("design")), step_group=step.get("group"),
            first_step_ms=_number(record.get("first_step_ms")),
            input_median_ms=_number(_mapping(record.get("input_time_ms")).get("median")),
            bound=bool(record.get("bound")), timed_by=_text(record.get("timed_by")),
            keras_backend=_text(_mapping(record.get("software")).get("keras_backend")),
            engine=_mapping(record.get("engine")),
            experiment=experiment if isinstance(experiment, Mapping) else None,
            import_s=_number(_mapping(record.get("timing")).get("import_s")), wall_s=_number(record.get("wall_s")),
            attribution_s=_number(_mapping(record.get("profile")).get("attribution_s")),
            workload=_mapping(record.get("workload")), size=_text(record.get("size")))

    @property
    def key(self) -> tuple[str, str, str]:
        """Its cell of the stack x precision x variant matrix (run_key)."""
        return (self.stack, self.precision, self.variant)

    @property
    def ok(self) -> bool:
        """It finished (status "ok"), whole or cut at the slow-step bound."""
        return self.status == "ok"

    @property
    def usable(self) -> bool:
        """It finished whole: not cut by the slow-step bound, with a step time. The one rule for a run whose step
        sets another's bound, pairs in the rounds or is timed again there."""
        return self.ok and not self.bound and self.step_median_ms is not None and self.step_median_ms > 0

    @property
    def cut(self) -> bool:
        """It finished at the slow-step bound: its step is a bound, not a measurement."""
        return self.ok and self.bound

    @property
    def original(self) -> bool:
        return self.variant == "original"

    @property
    def median_s(self) -> float | None:
        """Its median step in seconds; None where it has none."""
        return self.step_median_ms / 1000.0 if self.step_median_ms is not None and self.step_median_ms > 0 else None

    @property
    def first_step_s(self) -> float:
        """Its first step (tracing included) in seconds; 0 where it has none."""
        return (self.first_step_ms or 0.0) / 1000.0

    @property
    def on_gpu(self) -> bool:
        """Its workload ran on a GPU (its `device`: "gpu:0")."""
        return self.device.startswith("gpu")

    @property
    def timed_in_rounds(self) -> bool:
        """Its step statistics are its interleaved rounds' (step_time_ms.design)."""
        return self.step_design == "interleaved"

    @property
    def made_by_rounds(self) -> bool:
        """It had no process of its own: a rounds process made its record (`timed_by`)."""
        return self.timed_by == "interleaved_rounds"


def find_run(records: Iterable[Mapping[str, Any]], stack: str, precision: str, variant: str = "original",
             usable: bool = False) -> Run | None:
    """The first finished run of one cell (status ok, cut or not); with `usable`, the first that finished whole."""
    for record in records:
        run = Run.of(record)
        if run.key == (stack, precision, variant) and (run.usable if usable else run.ok):
            return run
    return None


# Docker engines reached through these schemes run on this machine, beside the host runs.
LOCAL_DOCKER_SCHEMES = ("unix://", "npipe://")


HOST_MACHINE = "host"


def machine_key(run: RunRecord) -> str:
    """The machine a run ran on: "" for the results' own host (host runs and local engines), else the
    remote engine's machine name (two engines on one machine share it) or, failing that, its URL."""
    recorded = Run.of(run).machine
    if recorded:
        return "" if recorded == HOST_MACHINE else recorded
    return _older_docker(run)[0]


def engine_label(run: Mapping[str, Any]) -> str:
    """Where a run ran, in words: "docker tcp://gpu-box:2376 gpu 1", "host", "slurm node-3"."""
    engine = Run.of(run).engine
    label = engine.get("label")
    if isinstance(label, str) and label:
        return label
    return _older_docker(run)[1] or str(engine.get("kind") or "")


def rerun_options(run: Mapping[str, Any]) -> list[str]:
    """The diagnose options that run a configuration where this run ran, as its engine wrote them."""
    engine = Run.of(run).engine
    rerun = engine.get("rerun")
    if isinstance(rerun, list) and all(isinstance(a, str) for a in rerun):
        return list(rerun)
    return _older_docker(run)[2]


def _older_docker(run: Mapping[str, Any]) -> tuple[str, str, list[str]]:
    """The one fallback for documents written before engines recorded `machine`, `engine.label` and `engine.rerun`:
    (machine key, label, rerun options) inferred from the engine's fields. A record with a container (a Docker
    engine's) ran in its stack; Slurm's records carried their machine and say --slurm; anything else is this host,
    a hand-written run's "stack" included (no catalogue name --stack takes)."""
    engine = Run.of(run).engine
    if engine.get("kind") == "slurm":
        return "", "", ["--slurm"]
    if not (engine.get("image") or engine.get("kind") == "docker"):
        return "", "", []
    docker_host = str(engine.get("docker_host") or "")
    remote = bool(docker_host) and not docker_host.startswith(LOCAL_DOCKER_SCHEMES)
    name = str(engine.get("name") or "")
    gpu = engine.get("gpu_index", engine.get("gpu_name"))
    label = " ".join(["docker", *([docker_host] if docker_host else []), *([f"gpu {gpu}"] if gpu is not None else [])])
    rerun = ["--stack", str(run.get("stack")), "--no-host"] + (["--docker-host", docker_host] if remote else [])
    return (name or docker_host) if remote else "", label, rerun


def machine_id(run: RunRecord) -> str:
    """The stable id results.json gives a run's machine (`runs[].machine`, the keys of `machines`)."""
    return machine_key(run) or HOST_MACHINE


def machine_facts(run: RunRecord) -> dict[str, Any]:
    """What a run's own engine recorded of its machine, for the top-level `machines` map."""
    engine = Run.of(run).engine
    gpus = []
    if engine.get("gpu_name"):
        gpus.append({"index": engine.get("gpu_index", 0), "name": engine["gpu_name"],
                     "compute_capability": engine.get("gpu_compute_capability"),
                     "driver_version": engine.get("gpu_driver_version"), "uuid": engine.get("gpu_uuid")})
    facts: dict[str, Any] = {"gpus": gpus, "engine": {k: engine.get(k) for k in ("kind", "docker_host", "name")
                                                      if engine.get(k) is not None}}
    if isinstance(engine.get("cpu"), dict):
        facts["cpu"] = engine["cpu"]
    return facts


def group_runs_by_machine(runs: Iterable[RunRecord]) -> dict[str, list[RunRecord]]:
    """Runs grouped by machine_key, in first-seen order."""
    groups: dict[str, list[RunRecord]] = {}
    for run in runs:
        groups.setdefault(machine_key(run), []).append(run)
    return groups


def _fail(source: str, what: str) -> DoctorError:
    return DoctorError(
        f"{source}: {what}",
        hint="results files follow schema_version 1; see docs/results-schema.md in fp16doctor's repository",
    )


def _short(value: Any, limit: int = 60) -> str:
    """repr() for error messages: one line, bounded length, whatever the file holds."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _check_number(source: str, where: str, value: Any) -> None:
    """Optional numbers: when present they must be finite-or-infinite JSON numbers, never text or booleans."""
    if value is not None:
        _check_type(source, where, value, (int, float), "a number")


def _check_type(source: str, where: str, value: Any, kind: type | tuple[type, ...], name: str) -> None:
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool) and bool not in (
        kind if isinstance(kind, tuple) else (kind,)
    )):
        raise _fail(source, f"{where} must be {name}, got {type(value).__name__}")


def validate(doc: Any, source: str = "results") -> Document:
    """Check the keys docs/results-schema.md marks required; optional keys are checked only for type when present."""
    if not isinstance(doc, dict):
        raise _fail(source, f"expected a JSON object at the top level, got {type(doc).__name__}")
    if "schema_version" not in doc:
        raise _fail(source, "missing required key 'schema_version'")
    version = doc["schema_version"]
    if isinstance(version, bool) or version != SCHEMA_VERSION:
        raise DoctorError(
            f"{source}: unsupported schema_version {_short(version)} "
            f"(this fp16doctor reads {SCHEMA_VERSION})",
            hint="upgrade fp16doctor, or write the file per schema_version 1",
        )
    host = doc.get("host")
    if host is None:
        raise _fail(source, "missing required key 'host'")
    _check_type(source, "host", host, dict, "an object")
    gpus = host.get("gpus")
    if gpus is None:
        raise _fail(source, "missing required key 'host.gpus' (an empty list when there is no GPU)")
    _check_type(source, "host.gpus", gpus, list, "a list")
    for i, gpu in enumerate(gpus):
        _check_type(source, f"host.gpus[{i}]", gpu, dict, "an object")
        _check_type(source, f"host.gpus[{i}].name", gpu.get("name"), str, "a string")
        cc = gpu.get("compute_capability")
        if cc is not None:
            _check_type(source, f"host.gpus[{i}].compute_capability", cc, str, 'a string like "7.0"')
    cpu = host.get("cpu")
    if cpu is not None:
        _check_type(source, "host.cpu", cpu, dict, "an object")
        if cpu.get("flags") is not None:
            _check_type(source, "host.cpu.flags", cpu["flags"], list, "a list of strings")
    runs = doc.get("runs")
    if runs is None:
        raise _fail(source, "missing required key 'runs'")
    _check_type(source, "runs", runs, list, "a list")
    for i, run in enumerate(runs):
        where = f"runs[{i}]"
        _check_type(source, where, run, dict, "an object")
        for key in ("stack", "precision", "device", "status"):
            if key not in run:
                raise _fail(source, f"{where} is missing required key '{key}'")
            _check_type(source, f"{where}.{key}", run[key], str, "a string")
        if run["precision"] not in PRECISIONS:
            raise _fail(source, f"{where}.precision {_short(run['precision'])} is not one of "
                                f"{', '.join(PRECISIONS)}")
        if run["status"] not in RUN_STATUSES:
            raise _fail(source, f"{where}.status {_short(run['status'])} is not one of "
                                f"{', '.join(RUN_STATUSES)}")
        for key in ("variant", "error"):
            if key in run and run[key] is not None:
                _check_type(source, f"{where}.{key}", run[key], str, "a string")
        for key in ("software", "workload", "engine", "model", "loss", "input_time_ms",
                    "gpu_utilization_pct", "experiment", "ops"):
            if key in run and run[key] is not None:
                _check_type(source, f"{where}.{key}", run[key], dict, "an object")
        if run["status"] == "ok":
            step = run.get("step_time_ms")
            if step is None:
                raise _fail(source, f"{where} has status ok but no 'step_time_ms'")
            _check_type(source, f"{where}.step_time_ms", step, dict, "an object")
            median = step.get("median")
            _check_type(source, f"{where}.step_time_ms.median", median, (int, float), "a number")
            if not median > 0:
                raise _fail(source, f"{where}.step_time_ms.median must be positive, got {_short(median)}")
        elif run.get("step_time_ms") is not None:
            _check_type(source, f"{where}.step_time_ms", run["step_time_ms"], dict, "an object")
        for key in ("p10", "p90", "n"):
            _check_number(source, f"{where}.step_time_ms.{key}", (run.get("step_time_ms") or {}).get(key))
        for key in ("input_time_ms", "gpu_utilization_pct"):
            _check_number(source, f"{where}.{key}.median", (run.get(key) or {}).get("median"))
        for key in ("first", "last"):
            _check_number(source, f"{where}.loss.{key}", (run.get("loss") or {}).get(key))
        for key in ("image_height", "image_width", "channels", "batch_size"):
            _check_number(source, f"{where}.workload.{key}", (run.get("workload") or {}).get(key))
        for key in ("first_step_ms",):
            _check_number(source, f"{where}.{key}", run.get(key))
    findings = doc.get("findings")
    if findings is not None:
        _check_type(source, "findings", findings, list, "a list")
        for i, finding in enumerate(findings):
            _check_type(source, f"findings[{i}]", finding, dict, "an object")
    return doc


# A report embeds the documents it was made from in <script type="application/json" id="...">
# (templates/report.html.j2), so `explain` and `report` read a report.html as they read its results.json; a large
# set is gzip-compressed and base64-encoded there (data-encoding="gzip+base64").
REPORT_RESULTS_ID = "fp16doctor-results"
REPORT_RESULTS_GZIP = "gzip+base64"


class _EmbeddedResults(HTMLParser):
    """Collects the text of the report's results <script>, wherever a browser's "save as" put its attributes."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.inside = False
        self.found = False
        self.encoding = ""
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script" and dict(attrs).get("id") == REPORT_RESULTS_ID:
            self.inside = self.found = True
            self.encoding = dict(attrs).get("data-encoding") or ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self.inside = False

    def handle_data(self, data: str) -> None:
        if self.inside:
            self.parts.append(data)


def _read_text(p: Path) -> tuple[Path, str]:
    try:
        exists = p.exists()
    except (OSError, ValueError):  # a name the OS cannot even look up (too long, NUL byte)
        exists = False
    if not exists:
        raise DoctorError(f"{p}: no such file", hint="pass the results.json that `fp16doctor diagnose` wrote")
    if p.is_dir():
        candidate = p / "results.json"
        if candidate.is_file():
            p = candidate
        else:
            raise DoctorError(f"{p} is a directory without results.json", hint="pass the results.json file")
    try:
        return p, p.read_text(encoding="utf-8-sig")  # -sig: files saved by Windows editors start with a BOM
    except UnicodeDecodeError:
        raise DoctorError(f"{p}: not UTF-8 text", hint="results files are UTF-8 JSON") from None
    except OSError as exc:
        raise DoctorError(f"{p}: cannot read ({exc.__class__.__name__})",
                          hint="check the path and permissions") from None


def _parse_json(p: Path, text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DoctorError(
            f"{p}: {what}not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})",
            hint="results files are JSON; check the file is complete",
        ) from None
    except RecursionError:
        raise DoctorError(f"{p}: JSON nested too deeply",
                          hint="results files are shallow JSON objects") from None


def _looks_like_html(text: str) -> bool:
    return text.lstrip()[:1] == "<"


def _embedded_text(p: Path, parser: _EmbeddedResults) -> str:
    """The embedded results' JSON text, unpacked where the report compressed it."""
    text = "".join(parser.parts)
    if not parser.encoding:
        return text
    if parser.encoding != REPORT_RESULTS_GZIP:
        raise DoctorError(f"{p}: the embedded results are in an unknown encoding ({parser.encoding[:40]})",
                          hint="pass the results.json the report was made from")
    try:
        return gzip.decompress(base64.b64decode("".join(text.split()), validate=True)).decode("utf-8")
    except (binascii.Error, OSError, EOFError, UnicodeDecodeError):
        raise DoctorError(f"{p}: the embedded results are damaged (not gzip+base64)",
                          hint="pass the results.json the report was made from") from None


def load_all(path: str | Path) -> list[Document]:
    """The documents in one file, each checked: a results.json holds one; a report.html those it embeds
    (several for a comparison report)."""
    p, text = _read_text(Path(path))
    if not _looks_like_html(text):
        return [validate(_parse_json(p, text, ""), source=str(p))]
    parser = _EmbeddedResults()
    parser.feed(text)
    parser.close()
    if not parser.found:
        raise DoctorError(f"{p}: an HTML file without fp16doctor's embedded results",
                          hint="pass a report.html that `fp16doctor diagnose` or `fp16doctor report` wrote, "
                               "or its results.json")
    embedded = _parse_json(p, _embedded_text(p, parser), "the embedded results are ")
    docs = embedded if isinstance(embedded, list) else [embedded]
    if not docs:
        raise DoctorError(f"{p}: the report embeds no results", hint="pass the results.json it was made from")
    return [validate(doc, source=f"{p} (embedded document {i + 1})" if len(docs) > 1 else str(p))
            for i, doc in enumerate(docs)]


def load(path: str | Path) -> Document:
    """Read and check one results document (a results.json, or a report.html of one diagnosis); every
    problem becomes a one-line DoctorError."""
    docs = load_all(path)
    if len(docs) > 1:
        raise DoctorError(f"{path}: a comparison report of {len(docs)} diagnoses; this reads one",
                          hint="pass one of the results.json files (or single reports) it was made from",
                          exit_code=EXIT_USAGE)
    return docs[0]


def _json_safe(value: Any) -> Any:
    """NaN and infinities have no JSON spelling: they become null (a run's nan_or_inf keeps the fact)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def dump(doc: Document) -> str:
    return json.dumps(_json_safe(doc), indent=2, sort_keys=False, allow_nan=False, default=str) + "\n"


def write_atomic(path: Path, text: str) -> None:
    """Write via a temporary file and rename, so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = str(path.parent / f".tmp-{path.name}-{uuid.uuid4().hex}")
    # Mode 0666 less the umask, as for any new file. (Reading the umask by setting it would change it
    # for the whole process, under the worker threads that create files too.)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


class ResultsWriter:
    """Keeps results.json on disk current: every finished run is written at once."""

    def __init__(self, path: Path, doc: Document) -> None:
        self.path = path
        self.doc = doc
        self.save()

    def add_run(self, run: RunRecord) -> None:
        # A re-run of the same cell replaces the older record (this is what --resume relies on).
        run.setdefault("machine", machine_id(run))
        machines = self.doc.setdefault("machines", {})
        if run["machine"] == HOST_MACHINE:
            machines.setdefault(HOST_MACHINE, {k: self.doc["host"].get(k) for k in ("cpu", "gpus", "os")})
        else:
            facts = machine_facts(run)
            known = machines.setdefault(run["machine"], facts)
            for gpu in facts["gpus"]:  # a machine's GPUs are learnt run by run
                if all(g.get("uuid") != gpu.get("uuid") or g.get("name") != gpu.get("name") for g in known["gpus"]):
                    known["gpus"].append(gpu)
            # So are its CPU and engine: a first record without them (a failed run) leaves them to a later one.
            if "cpu" in facts and not known.get("cpu"):
                known["cpu"] = facts["cpu"]
            for key, value in facts["engine"].items():
                known.setdefault("engine", {}).setdefault(key, value)
        key = run_key(run)
        runs = [r for r in self.doc["runs"] if run_key(r) != key]
        runs.append(run)
        self.doc["runs"] = runs
        self.save()

    def set_findings(self, findings: Iterable[dict[str, Any]], verdicts: Iterable[dict[str, Any]] = (),
                     prescriptions: Iterable[dict[str, Any]] = (),
                     stack_comparisons: Iterable[dict[str, Any]] = (),
                     ledgers: Iterable[dict[str, Any]] = ()) -> None:
        self.doc["findings"] = list(findings)
        self.doc["ledgers"] = list(ledgers)
        self.doc["verdicts"] = list(verdicts)
        self.doc["prescriptions"] = list(prescriptions)
        self.doc["stack_comparisons"] = list(stack_comparisons)
        self.save()

    def save(self) -> None:
        # Home directories as ~, as in the report (the file is shared too); a path into the output
        # directory (a script's log, kept profiles) relative to it, so it still finds the file from here.
        out_dir = {os.path.abspath(self.path.parent), str(self.path.parent.resolve())}
        # Secrets too (a token passed as a script argument, a password in an engine URL), as in the report.
        write_atomic(self.path, dump(redact(redact_home_paths(self.doc, relative_to=out_dir), homes=False,
                                            opaque=False)))
