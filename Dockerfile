# Built by fp16doctor; see fp16doctor/stacks.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
