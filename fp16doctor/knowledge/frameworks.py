"""TensorFlow, Keras, PyTorch and JAX as data: what each release was built for and which fp16
features it has."""

from __future__ import annotations

from dataclasses import dataclass

from fp16doctor.knowledge.cuda import version_at_least

TF_TESTED_BUILDS = "https://www.tensorflow.org/install/source#gpu"  # "Tested build configurations"
TF_MIXED_PRECISION_GUIDE = "https://www.tensorflow.org/guide/mixed_precision"
TF_AMP_GRAPH_REWRITE = (
    "https://www.tensorflow.org/versions/r1.15/api_docs/python/tf/train/experimental/"
    "enable_mixed_precision_graph_rewrite"
)
TF_1_14_RELEASE = "https://github.com/tensorflow/tensorflow/releases/tag/v1.14.0"
TF_TF32 = "https://www.tensorflow.org/api_docs/python/tf/config/experimental/enable_tensor_float_32_execution"
KERAS3_MIXED_PRECISION = "https://keras.io/api/mixed_precision/policy/"
KERAS_PREPROCESSING_DTYPE = "https://github.com/keras-team/keras-preprocessing/pull/209"
TORCH_AMP = "https://pytorch.org/docs/stable/amp.html"
TORCH_TF32 = "https://pytorch.org/docs/stable/notes/cuda.html#tensorfloat-32-tf32-on-ampere-and-later-devices"
JAX_PRECISION = "https://docs.jax.dev/en/latest/201/precision.html"


@dataclass(frozen=True)
class TfBuild:
    version: str
    cuda: str | None
    cudnn: str | None
    python: str  # "min-max"


# Source: TF_TESTED_BUILDS (Linux GPU table).
TF_BUILDS: dict[str, TfBuild] = {
    b.version: b
    for b in (
        TfBuild("1.4", "8", "6", "2.7, 3.3-3.6"),
        TfBuild("1.5", "9", "7", "2.7, 3.3-3.6"),
        TfBuild("1.6", "9", "7", "2.7, 3.3-3.6"),
        TfBuild("1.7", "9", "7", "2.7, 3.3-3.6"),
        TfBuild("1.8", "9", "7", "2.7, 3.3-3.6"),
        TfBuild("1.9", "9", "7", "2.7, 3.3-3.6"),
        TfBuild("1.10", "9", "7", "2.7, 3.3-3.6"),
        TfBuild("1.11", "9", "7", "2.7, 3.3-3.6"),
        TfBuild("1.12", "9", "7", "2.7, 3.3-3.6"),
        TfBuild("1.13", "10.0", "7.4", "2.7, 3.3-3.7"),
        TfBuild("1.14", "10.0", "7.4", "2.7, 3.3-3.7"),
        TfBuild("1.15", "10.0", "7.4", "2.7, 3.3-3.7"),
        TfBuild("2.0", "10.0", "7.4", "2.7, 3.3-3.7"),
        TfBuild("2.1", "10.1", "7.6", "2.7, 3.5-3.7"),
        TfBuild("2.2", "10.1", "7.6", "3.5-3.8"),
        TfBuild("2.3", "10.1", "7.6", "3.5-3.8"),
        TfBuild("2.4", "11.0", "8.0", "3.6-3.8"),
        TfBuild("2.5", "11.2", "8.1", "3.6-3.9"),
        TfBuild("2.6", "11.2", "8.1", "3.6-3.9"),
        TfBuild("2.7", "11.2", "8.1", "3.7-3.9"),
        TfBuild("2.8", "11.2", "8.1", "3.7-3.10"),
        TfBuild("2.9", "11.2", "8.1", "3.7-3.10"),
        TfBuild("2.10", "11.2", "8.1", "3.7-3.10"),
        TfBuild("2.11", "11.2", "8.1", "3.7-3.10"),
        TfBuild("2.12", "11.8", "8.6", "3.8-3.11"),
        TfBuild("2.13", "11.8", "8.6", "3.8-3.11"),
        TfBuild("2.14", "11.8", "8.7", "3.9-3.11"),
        TfBuild("2.15", "12.2", "8.9", "3.9-3.11"),
        TfBuild("2.16", "12.3", "8.9", "3.9-3.12"),
        TfBuild("2.17", "12.3", "8.9", "3.9-3.12"),
        TfBuild("2.18", "12.5", "9.3", "3.9-3.12"),
        TfBuild("2.19", "12.5", "9.3", "3.9-3.12"),
        TfBuild("2.20", "12.5", "9.3", "3.9-3.13"),
    )
}


def tf_build(version: str | None) -> TfBuild | None:
    if not version:
        return None
    parts = version.split(".")
    return TF_BUILDS.get(".".join(parts[:2])) if len(parts) >= 2 else None


@dataclass(frozen=True)
class Feature:
    framework: str  # "tensorflow" | "keras" | "torch" | "jax" | "keras_preprocessing"
    since: str
    until: str | None  # first version without it (exclusive); None = still present
    what: str
    source: str


# Framework features that decide how fast fp16 can be, by version.
FEATURES: dict[str, Feature] = {
    "tf_amp_graph_rewrite": Feature(
        "tensorflow",
        "1.14",
        None,
        "automatic mixed precision graph rewrite (TF_ENABLE_AUTO_MIXED_PRECISION=1 or "
        "tf.train.experimental.enable_mixed_precision_graph_rewrite)",
        TF_AMP_GRAPH_REWRITE,
    ),
    "tf_fp16_nhwc_tensor_cores": Feature(
        "tensorflow",
        "1.14",
        None,
        "fp16 NHWC convolutions on Tensor Cores without NHWC->NCHW transposes",
        TF_1_14_RELEASE,
    ),
    "tf_keras_policy_experimental": Feature(
        "tensorflow",
        "2.1",
        None,
        "tf.keras.mixed_precision.experimental.Policy('mixed_float16') with loss scaling",
        TF_MIXED_PRECISION_GUIDE,
    ),
    "tf_keras_policy": Feature(
        "tensorflow",
        "2.4",
        None,
        "tf.keras.mixed_precision.set_global_policy('mixed_float16')",
        TF_MIXED_PRECISION_GUIDE,
    ),
    "tf_tf32_default": Feature(
        "tensorflow",
        "2.4",
        None,
        "TensorFloat-32 enabled by default for float32 matmuls and convolutions",
        TF_TF32,
    ),
    "keras3_policy": Feature(
        "keras",
        "3.0",
        None,
        "keras.mixed_precision.set_dtype_policy('mixed_float16') on any backend",
        KERAS3_MIXED_PRECISION,
    ),
    # keras_preprocessing's DirectoryIterator built float32 batches whatever dtype was asked for
    # (keras_preprocessing's image.py; fix: KERAS_PREPROCESSING_DTYPE).
    "kp_ignores_dtype": Feature(
        "keras_preprocessing",
        "1.0.5",
        "1.1.1",
        "flow_from_directory ignores dtype and yields float32 batches",
        KERAS_PREPROCESSING_DTYPE,
    ),
    "torch_amp": Feature("torch", "1.6", None, "torch.cuda.amp autocast and GradScaler", TORCH_AMP),
    "torch_tf32_matmul_default": Feature(
        "torch", "1.7", "1.12", "torch.backends.cuda.matmul.allow_tf32 defaults to True", TORCH_TF32
    ),
    "torch_tf32_cudnn_default": Feature(
        "torch", "1.7", None, "torch.backends.cudnn.allow_tf32 defaults to True (convolutions)", TORCH_TF32
    ),
    "jax_tf32_default": Feature(
        "jax",
        "0.2",
        None,
        "float32 dot products and convolutions use TF32 by default on recent GPUs",
        JAX_PRECISION,
    ),
}


def has_feature(key: str, version: str | None) -> bool | None:
    """Whether `version` of the feature's framework has it; None when the version is unknown."""
    feature = FEATURES[key]
    after = version_at_least(version, feature.since)
    if after is None:
        return None
    if not after:
        return False
    if feature.until is None:
        return True
    before_end = version_at_least(version, feature.until)
    return None if before_end is None else not before_end


# Keras 2.1.x's ImageDataGenerator builds batches with dtype=K.floatx() and rescales them in place, so
# floatx=float16 makes the host do float16 numpy arithmetic (keras 2.1.5 preprocessing/image.py).
KERAS_FLOATX_BATCHES_UNTIL = "2.2.0"
# Keras 2.2.0 moved the generator into keras_preprocessing.
KERAS_USES_KERAS_PREPROCESSING_SINCE = "2.2.0"
# numpy has no float16 SIMD arithmetic on most x86 CPUs: each operation converts (numpy issues 7571, 11590).
NUMPY_FP16_ISSUES = (
    "https://github.com/numpy/numpy/issues/7571",
    "https://github.com/numpy/numpy/issues/11590",
)
@dataclass(frozen=True)
class HostBatchEstimate:
    """Host time to build one ImageDataGenerator batch in float16 and float32, measured by fp16doctor on one
    machine: quoted for a document that carries no measured input time of its own, labelled as an estimate."""

    float16_ms: float
    float32_ms: float
    batch_size: int
    image_height: int
    image_width: int
    source: str

    @property
    def image_size(self) -> tuple[int, int]:
        return self.image_height, self.image_width

    def scale(self, batch_size: int, image_size: tuple[int, int]) -> float:
        """How many times this measurement's work a batch of `batch_size` images of `image_size` (height, width)
        is: numpy's work is per element."""
        return batch_size * image_size[0] * image_size[1] / (self.batch_size * self.image_height * self.image_width)


# The seed workload's generator (rescale and both flips, JPEG decode included) timed by fp16doctor itself: the
# tf1.7-cpu stack (TensorFlow 1.7.0, Keras 2.1.5, numpy 1.14.2, Python 2.7.18), quick size, on a 2-core AMD EPYC
# (family 25) with AVX2 and F16C, `input_time_ms` medians of float16 (floatx) and float32 batches. The run is in
# docs/examples/cpu-epyc-avx2-three-stacks-quick (a unit test holds these figures to it). numpy emulates float16
# arithmetic in software (numpy issues 7571, 11590). Measured on another machine than the one a document
# describes: evidence for a likely cause (verdicts[].likely_cause), never a verdict cause with explains_ms.
HOST_FP16_BATCH_ESTIMATE = HostBatchEstimate(
    float16_ms=101.9, float32_ms=61.0, batch_size=32, image_height=112, image_width=168,
    source="Keras 2.1.5's ImageDataGenerator on fp16doctor's tf1.7-cpu stack (2-core AMD EPYC, AVX2 and F16C)",
)


# TensorFlow reads both variables with default true (tensorflow/core/util/matmul_autotune.cc:
# ReadBoolFromEnvVar("TF_FP16_MATMUL_USE_FP32_COMPUTE", true, ...); likewise for convolutions): fp16
# convolutions and matmuls use fp32 compute, which runs at the fp32 rate on GPUs without Tensor Cores
# (https://github.com/tensorflow/tensorflow/issues/15585, P100).
TF_FP16_FP32_COMPUTE_ENV = ("TF_FP16_CONV_USE_FP32_COMPUTE", "TF_FP16_MATMUL_USE_FP32_COMPUTE")


# Libraries that run a float16 model on a CPU by inserting Cast nodes around every op that has no float16 kernel
# there (float16 -> float32 before it, float32 -> float16 after), so the casts, not the arithmetic, are what a float16
# model adds: ONNX Runtime's InsertCastTransformer for its CPU execution provider.
CASTS_FOR_MISSING_CPU_KERNELS: dict[str, str] = {
    name: "https://github.com/microsoft/onnxruntime/blob/main/onnxruntime/core/optimizer/insert_cast_transformer.cc"
    for name in ("onnxruntime", "onnxruntime-gpu")
}
