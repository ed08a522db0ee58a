"""`diagnose --slurm`'s options, declared once (engines/options.py): each field's flag, variable and sbatch argument."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from fp16doctor.engines.options import EngineOptions, Said, option

CONTAINER = "{flag} runs a stack's container, and no --stack was given"


@dataclass(frozen=True)
class SlurmOptions(EngineOptions):
    """What `diagnose --slurm` was asked for the jobs."""

    panel: ClassVar[str] = "Slurm"
    selector: ClassVar[str | None] = "--slurm"
    unselected: ClassVar[Said | None] = ("{flag} applies to Slurm jobs", "add --slurm")
    exclusive: ClassVar[Said | None] = (
        "--slurm runs the matrix on the cluster's nodes; {flag} does not combine with it",
        "drop {flag}: the nodes run this host's cells on their own Python, and the stacks' containers with --runtime")

    slurm: bool = option("--slurm", "Run the matrix as Slurm jobs: one per comparison group, on the nodes' own Python.",
                         default=False)
    partition: str | None = option("--partition", "With --slurm: the partition to submit to.",
                                   env="FP16DOCTOR_PARTITION", tool="--partition")
    # GPUs per job, e.g. gpu:a100:1 (typed) or gpu:1; None: a CPU job
    gres: str | None = option("--gres", "With --slurm: GPUs per job, typed where the cluster types them (gpu:a100:1);"
                              " without it the jobs are exclusive CPU jobs.", env="FP16DOCTOR_GRES", tool="--gres")
    constraint: str | None = option("--constraint", "With --slurm: node features (sbatch -C).",
                                    env="FP16DOCTOR_CONSTRAINT", tool="--constraint")
    account: str | None = option("--account", "With --slurm: the account to charge.", env="FP16DOCTOR_ACCOUNT",
                                 tool="--account")
    qos: str | None = option("--qos", "With --slurm: the quality of service.", env="FP16DOCTOR_QOS", tool="--qos")
    time: str | None = option("--time", "With --slurm: each job's time limit (sbatch -t).", env="FP16DOCTOR_TIME",
                              tool="--time")
    # Passed to sbatch as given, after the others.
    extra_args: tuple[str, ...] = option(
        "--slurm-arg", "With --slurm: one more sbatch argument; repeatable (write --slurm-arg=--mem=16G).",
        default=(), metavar="ARG")
    workdir: Path | None = option("--slurm-workdir", "With --slurm: a folder on the cluster's shared filesystem"
                                  " (default: --out/slurm).", env="FP16DOCTOR_SLURM_WORKDIR")
    # --stack on the nodes (engines/slurm/runtimes.py): the container runtime (None: each node's own), and a
    # registry the nodes pull the stack's image from (None: they build it).
    runtime: str | None = option(
        "--runtime", "With --slurm --stack: docker, podman, apptainer or pyxis runs the stack's container on the nodes"
        " (default: the runtime each node has).", env="FP16DOCTOR_RUNTIME", needs_stack=CONTAINER)
    registry: str | None = option(
        "--registry", "With --slurm --stack: the nodes pull REGISTRY/fp16doctor/<stack>:<tag> instead of building it.",
        env="FP16DOCTOR_REGISTRY", needs_stack=CONTAINER)

    @property
    def gpu(self) -> bool:
        return bool(self.gres)

    def gres_value(self) -> str | None:
        """--gres 2 -> gpu:2; anything else as given."""
        if not self.gres:
            return None
        return f"gpu:{self.gres}" if self.gres.isdigit() else self.gres

    def sbatch_args(self) -> list[str]:
        """What the user asked for, on sbatch's command line (so it wins over SBATCH_* variables, which
        in turn win over the job script's own #SBATCH defaults)."""
        return [*self.tool_args(gres=self.gres_value()), *self.extra_args]

    def refusal(self, *, stacks: bool, script: bool) -> Said | None:
        if stacks and script:
            return ("--script with --stack does not run on Slurm yet",
                    "drop --stack (the nodes' own Python runs your script), or drop --slurm")
        return None

    def record(self) -> dict[str, Any]:
        return {"slurm": self.sbatch_args()} if self.slurm else {}
