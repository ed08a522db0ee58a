"""Building a stack's image on one Docker engine (the context: engines/context.py), once per engine and tag."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from fp16doctor.engines.context import (
    BuildOptions,
    Log,
    build_args,
    context_files,
    context_hash,
    image_labels,
    image_tag,
    make_tar,
)
from fp16doctor.engines.docker import sdk
from fp16doctor.stacks import StackSpec, get_stack

_log = logging.getLogger(__name__)
_build_locks: dict[tuple[str | None, str], threading.Lock] = {}
_build_locks_guard = threading.Lock()


@dataclass(frozen=True)
class BuildResult:
    image: str  # the tag, fp16doctor/<stack>:<context hash>
    seconds: float
    cached: bool  # the engine reused every layer: the image did not change
    image_id: str = ""
    docker_host: str = ""



def _lock_for(docker_host: str | None, tag: str) -> threading.Lock:
    with _build_locks_guard:
        return _build_locks.setdefault((docker_host, tag), threading.Lock())


def build(stack: StackSpec, options: BuildOptions, log: Log, docker_host: str | None = None) -> BuildResult:
    """Build the stack's image on one engine (the layer cache makes an unchanged rebuild fast)."""
    host = docker_host if docker_host is not None else options.docker_host
    files = context_files(stack, options)
    args = build_args(stack, options)
    digest = context_hash(files, args)
    tag = image_tag(stack, digest)
    with _lock_for(host, tag):
        log(f"building {tag} from {stack.base_image} on {sdk.engine_label(host)}")
        started = time.perf_counter()
        context = make_tar(files)
        try:
            built_id, cached = sdk.build_image(
                host, context, tag, args, image_labels(stack, digest), log,
                nocache=options.nocache, pull=options.pull)
        finally:
            context.close()
        seconds = time.perf_counter() - started
    _log.info("built %s on %s in %.1f s%s", tag, sdk.engine_label(host), seconds,
              " (every layer cached)" if cached else "")
    return BuildResult(image=tag, seconds=seconds, cached=cached, image_id=built_id,
                       docker_host=sdk.engine_label(host))


def build_stack(name: str, options: BuildOptions, log: Log) -> BuildResult:
    """`fp16doctor stacks build NAME`: build (or refresh from cache) one stack's image."""
    return build(get_stack(name), options, log)


def ensure_image(stack: StackSpec, docker_host: str | None, options: BuildOptions, log: Log) -> str:
    """The stack's image tag on this engine, built only when the engine lacks this exact context."""
    files = context_files(stack, options)
    tag = image_tag(stack, context_hash(files, build_args(stack, options)))
    with _lock_for(docker_host, tag):
        if sdk.image_id(docker_host, tag) is not None:
            log(f"{tag} is already on {sdk.engine_label(docker_host)}")
            return tag
    return build(stack, options, log, docker_host=docker_host).image
