"""The labels every image and container fp16doctor makes carries, so leftovers can be found and removed
(by `fp16doctor` itself, by compose files, by hand: `docker ps -a --filter label=org.fp16doctor.managed=true`)."""

MANAGED_LABEL = "org.fp16doctor.managed"
STACK_LABEL = "org.fp16doctor.stack"
RUN_ID_LABEL = "org.fp16doctor.run-id"
PRECISION_LABEL = "org.fp16doctor.precision"
VARIANT_LABEL = "org.fp16doctor.variant"
CONTEXT_LABEL = "org.fp16doctor.context-hash"
VERSION_LABEL = "org.fp16doctor.version"
# The fp16doctor process that started a container (machine and pid), so a later fp16doctor can tell a
# container whose owner was killed (SIGKILL leaves it running under containerd-shim) from a live run.
OWNER_HOST_LABEL = "org.fp16doctor.owner-host"
OWNER_PID_LABEL = "org.fp16doctor.owner-pid"
