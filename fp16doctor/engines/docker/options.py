"""The Docker engine's options, declared once (engines/options.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from fp16doctor.engines.options import ADD_STACK, EngineOptions, Said, option


@dataclass(frozen=True)
class DockerOptions(EngineOptions):
    """Where the pinned stacks' containers run."""

    panel: ClassVar[str] = "Docker stacks"
    stacks_only: ClassVar[Said | None] = ("{flag} without --stack runs nothing in Docker", ADD_STACK)

    # None given: the environment's engine (DOCKER_HOST, the current context).
    docker_hosts: tuple[str, ...] = option(
        "--docker-host", "Docker engine URL (unix://, tcp://, ssh://) or context name; repeatable (the variable:"
        " separated by spaces; it applies with --stack). Append #gpus=0,2 (indices or UUIDs), #gpus=all or #gpus=none"
        " to choose that engine's GPUs.", default=(), env="FP16DOCTOR_DOCKER_HOST", metavar="URL")

    def record(self) -> dict[str, Any]:
        return {"docker_hosts": list(self.docker_hosts)}

    @classmethod
    def rerun_words(cls, invocation: dict[str, Any]) -> list[str]:
        hosts = invocation.get("docker_hosts")
        if not isinstance(hosts, list):
            return []
        return [word for host in hosts if isinstance(host, str) for word in ("--docker-host", host)]
