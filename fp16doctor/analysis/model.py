"""Layers of the measured model: read from a run's `model` section, or computed for the seed workload."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fp16doctor.analysis.values import as_int, as_list, as_mapping, as_number, as_positive, as_str
from fp16doctor.workload.protocol import SEED_WORKLOAD, SIZES

# The seed script's convolutions (the question's model): 3x3, same-padded, each followed by 2x2 max pooling.
SEED_CONVS = ((None, 32), (32, 32), (32, 64), (64, 64))


@dataclass(frozen=True)
class Layer:
    type: str
    in_channels: int | None
    out_channels: int | None
    kernel: tuple[int, int] | None
    input_elements: int  # per example
    output_elements: int  # per example
    flops_per_example: float  # forward pass, multiply and add counted as two
    params: int
    name: str | None = None  # the layer's name in the run (its ops carry it), where the record gives one
    compute_dtype: str | None = None  # the dtype its arithmetic ran in, where the record says
    autocast: bool | None = None  # whether Keras casts a floating input to its compute dtype (Embedding: no)

    @property
    def is_matmul(self) -> bool:
        """Convolutions and dense layers: the work Tensor Cores can take."""
        return self.type.lower() in ("conv2d", "conv3d", "conv1d", "dense", "depthwiseconv2d", "linear")

    @property
    def channel_multiple_of_8(self) -> bool | None:
        if self.in_channels is None or self.out_channels is None:
            return None
        return self.in_channels % 8 == 0 and self.out_channels % 8 == 0


def seed_layers(image_height: int, image_width: int, channels: int = 3) -> list[Layer]:
    """The seed model's layers at this image size (valid for any positive size; pooling floors like Keras)."""
    layers: list[Layer] = []
    h, w, c = image_height, image_width, channels
    for cin, cout in SEED_CONVS:
        cin = c if cin is None else cin
        flops = 2.0 * h * w * cin * cout * 9
        layers.append(
            Layer("Conv2D", cin, cout, (3, 3), h * w * cin, h * w * cout, flops, 9 * cin * cout + cout)
        )
        layers.append(
            Layer("Activation", cout, cout, None, h * w * cout, h * w * cout, float(h * w * cout), 0)
        )
        ph, pw = h // 2, w // 2
        layers.append(
            Layer("MaxPooling2D", cout, cout, (2, 2), h * w * cout, ph * pw * cout, float(h * w * cout), 0)
        )
        h, w, c = ph, pw, cout
    ah, aw = h // 2, w // 2
    layers.append(Layer("AveragePooling2D", c, c, (2, 2), h * w * c, ah * aw * c, float(h * w * c), 0))
    features = ah * aw * c
    layers.append(Layer("Flatten", None, None, None, features, features, 0.0, 0))
    layers.append(Layer("Dense", features, 1, None, features, 1, 2.0 * features, features + 1))
    layers.append(Layer("Activation", 1, 1, None, 1, 1, 1.0, 0))
    return layers


def _shape_elements(shape: Any) -> int | None:
    dims = [as_int(d) for d in as_list(shape)]
    if not dims or any(d is None or d <= 0 for d in dims):
        return None
    return math.prod(d for d in dims if d is not None)


def layer_from_record(record: Mapping[str, Any]) -> Layer | None:
    """One `model.layers[]` entry of a results file; None when it says too little to be useful."""
    kind = record.get("type")
    if not isinstance(kind, str):
        return None
    # Dense layers: the workload records in_features/out_features (Keras' words for the same thing).
    cin = as_int(record.get("in_channels"))
    cin = cin if cin is not None else as_int(record.get("in_features"))
    cout = as_int(record.get("out_channels"))
    cout = cout if cout is not None else as_int(record.get("out_features"))
    kernel_list = [k for k in (as_int(k) for k in as_list(record.get("kernel"))) if k is not None and k > 0]
    kernel = (kernel_list[0], kernel_list[1]) if len(kernel_list) == 2 else None
    out_elems = _shape_elements(record.get("output_shape")) or 0
    in_elems = _shape_elements(record.get("input_shape")) or 0
    if not in_elems and out_elems and cin and cout:
        in_elems = out_elems // cout * cin  # same-padded, stride 1: same spatial size
    flops = as_number(record.get("flops_per_example"))
    if flops is None:
        if kind.lower().startswith("conv") and kernel and cin and out_elems:
            flops = 2.0 * out_elems * cin * kernel[0] * kernel[1]
        elif kind.lower() in ("dense", "linear") and cin and cout:
            flops = 2.0 * cin * cout
        else:
            flops = float(out_elems)
    params = as_int(record.get("params")) or 0
    autocast = record.get("autocast")
    return Layer(kind, cin, cout, kernel, in_elems, out_elems, float(flops), params, as_str(record.get("name")),
                 as_str(record.get("compute_dtype")), autocast if isinstance(autocast, bool) else None)


@dataclass(frozen=True)
class ModelInput:
    """One input of the model as the first batch fed it (`model.inputs[]`): its dtype, the layers that take it, and
    whether the batch's values were whole numbers (ids, indices, counts) and how large."""

    name: str
    dtype: str | None
    consumers: tuple[str, ...]
    integer: bool | None  # every sampled value a whole number; None: the batch was not read
    max_abs: float | None


def inputs_from_record(model: Mapping[str, Any]) -> tuple[ModelInput, ...]:
    found = []
    for record in as_list(model.get("inputs")):
        record = as_mapping(record)
        values = as_mapping(record.get("values"))
        integer = values.get("integer")
        found.append(ModelInput(as_str(record.get("name")) or "input", as_str(record.get("dtype")),
                                tuple(c for c in (as_str(c) for c in as_list(record.get("consumers"))) if c),
                                integer if isinstance(integer, bool) else None, as_number(values.get("max_abs"))))
    return tuple(found)


@dataclass(frozen=True)
class ModelInfo:
    layers: tuple[Layer, ...]
    # "run" (measured by the workload) | "seed" (computed from the seed workload's size) | "totals" (a document's
    # FLOPs and parameters alone, no layers)
    source: str
    flops_per_example: float
    params: int
    inputs: tuple[ModelInput, ...] = ()  # as the first batch fed them, where the workload described them


def model_for_run(run: Mapping[str, Any]) -> ModelInfo | None:
    """The run's layers: its own model section if it has layers, else the seed model when it names
    seed_cnn."""
    model = as_mapping(run.get("model"))
    records = [r for r in as_list(model.get("layers")) if isinstance(r, Mapping)]
    layers = [layer for layer in (layer_from_record(r) for r in records) if layer is not None]
    if layers:
        total = as_number(model.get("flops_per_example")) or sum(la.flops_per_example for la in layers)
        params = as_int(model.get("params")) or sum(la.params for la in layers)
        return ModelInfo(tuple(layers), "run", total, params, inputs_from_record(model))
    stated = as_positive(model.get("flops_per_example"))
    if stated is not None:
        # A document that gives only the model's totals (a public report's well-known network): no layers to place
        # on Tensor Cores or to bound by memory, but the arithmetic a step holds.
        return ModelInfo((), "totals", stated, as_int(model.get("params")) or 0)
    workload = as_mapping(run.get("workload"))
    if workload.get("name") == SEED_WORKLOAD:
        h = as_int(workload.get("image_height")) or SIZES["full"]["image_height"]
        w = as_int(workload.get("image_width")) or SIZES["full"]["image_width"]
        c = as_int(workload.get("channels")) or 3
        if not (0 < h <= 65536 and 0 < w <= 65536 and 0 < c <= 4096):
            return None
        seed = seed_layers(h, w, c)
        return ModelInfo(
            tuple(seed), "seed", sum(la.flops_per_example for la in seed), sum(la.params for la in seed)
        )
    return None
