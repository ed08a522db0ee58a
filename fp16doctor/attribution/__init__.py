"""Raw profiler output -> ``runs[].ops``: what ran, on which layer and pass, with which implementation, and
for how long (docs/architecture.md, "Attribution"). Pure: imports only results, knowledge and errors (plus the
optional ``xprof`` reader for TensorFlow / JAX traces)."""

from fp16doctor.attribution.build import LOW_COVERAGE, build_device_time, build_ops

__all__ = ["LOW_COVERAGE", "build_device_time", "build_ops"]
