"""Training and inference as data: which libraries only run inference, and which advice only training has.

A document says its mode in `runs[].workload.mode`; a run whose software names an inference-only library is
inference whatever it says. Advice that only training has (what happens to weight updates, loss scaling, a batch
that changes the optimisation) is marked here, once: the analysis attaches these ids to the caveats and ideas it
writes, drops them for inference, and a test over the public cases holds every inference document to it.
"""

from __future__ import annotations

from collections.abc import Iterable

# Libraries that run a trained model and have no training loop, by the name a document's `software` gives them
# (lower-cased), each with the page that says what it is.
INFERENCE_ONLY_LIBRARIES: dict[str, str] = {
    "ctranslate2": "https://opennmt.net/CTranslate2/ (a fast inference engine for Transformer models)",
    "tensorrt": "https://docs.nvidia.com/deeplearning/tensorrt/ (an SDK for high-performance inference)",
    "tensorrt_llm": "https://nvidia.github.io/TensorRT-LLM/ (LLM inference on TensorRT)",
    "tensorrt-llm": "https://nvidia.github.io/TensorRT-LLM/ (LLM inference on TensorRT)",
    "llama.cpp": "https://github.com/ggml-org/llama.cpp (LLM inference in C/C++)",
    "onnxruntime": "https://onnxruntime.ai/docs/ (inference; training is another package, onnxruntime-training)",
    "onnxruntime-gpu": "https://onnxruntime.ai/docs/ (the CUDA build of onnxruntime)",
    "llama-cpp-python": "https://github.com/abetlen/llama-cpp-python (Python bindings for llama.cpp)",
    "fastertransformer": "https://github.com/NVIDIA/FasterTransformer (transformer encoder/decoder inference)",
    "migraphx": "https://rocm.docs.amd.com/projects/AMDMIGraphX/ (AMD's graph inference engine)",
    "openvino": "https://docs.openvino.ai/ (Intel's inference toolkit)",
    "ncnn": "https://github.com/Tencent/ncnn (a neural network inference framework for mobile)",
    "vllm": "https://docs.vllm.ai/ (LLM inference and serving)",
    "mlc-llm": "https://llm.mlc.ai/ (LLM deployment engine)",
}


def inference_only_library(names: Iterable[str]) -> str | None:
    """The first of a run's software names that is an inference-only library, else None."""
    return next((n for n in (name.strip().lower() for name in names) if n in INFERENCE_ONLY_LIBRARIES), None)


# Advice that only a training run has: the id the analysis attaches to a caveat or an idea, and why inference has
# none of it.
TRAINING_ONLY_ADVICE: dict[str, str] = {
    "weight_updates": "weights and optimizer state kept in a 16-bit type lose small updates: inference updates none",
    "loss_scaling": "loss scaling keeps small gradients in range: inference computes no gradient",
    "batch_changes_training": "a larger batch changes the optimisation (learning rate, convergence): inference "
                              "only trades each request's latency for throughput",
}
# Advice that needs a framework's own training-time API: an inference-only library has none of it (its engine
# chooses its kernels and precision when the model is converted).
FRAMEWORK_ONLY_ADVICE: dict[str, str] = {
    "mixed_policy": "a mixed precision policy (Keras dtype policy, torch.autocast) is a framework's switch",
    "framework_compiler": "XLA, jit_compile and torch.compile compile a framework's graph",
}


def advice_applies(advice: str | None, inference: bool, library: str | None) -> bool:
    """Whether advice of this id applies to a run: training-only advice never to inference, a framework's switch
    never to an inference-only library; unmarked advice (None) always."""
    if advice is None:
        return True
    if advice in TRAINING_ONLY_ADVICE:
        return not inference
    if advice in FRAMEWORK_ONLY_ADVICE:
        return library is None
    return True
