"""`fp16doctor diagnose`: prepare (checks, probe, engines, plan) -> the matrix on its engines -> the interleaved
rounds -> the experiments -> analysis -> report. One module per phase's concern:

- checks.py: what the user typed, checked before anything is created or run;
- plan.py: the matrix, what --resume keeps, the experiments the analysis asks for;
- prepare.py: the phases before the first run, in order;
- rounds.py: the interleaved rounds phase (which rounds processes run, their price and share of the budget, the
  sink that puts their records into the runs they timed);
- budget.py: the size's wall budget (the experiments that fit, what each costs, the arithmetic both share);
- sink.py: where an engine's records and events go (results.json, the display);
- replay.py: a document's diagnose planned and priced again by this release;
- run.py: run_diagnose, as its phases, in order.
"""

from fp16doctor.diagnose.checks import check_workload_imports
from fp16doctor.diagnose.plan import BASE_PRECISIONS, default_precisions, experiment_specs, plan_experiments, plan_runs
from fp16doctor.diagnose.run import DiagnoseOutcome, plan_diagnose, run_diagnose
from fp16doctor.options import HOST_STACK, DiagnoseOptions, Progress

__all__ = [
    "BASE_PRECISIONS",
    "HOST_STACK",
    "DiagnoseOptions",
    "DiagnoseOutcome",
    "Progress",
    "check_workload_imports",
    "default_precisions",
    "experiment_specs",
    "plan_diagnose",
    "plan_experiments",
    "plan_runs",
    "run_diagnose",
]
