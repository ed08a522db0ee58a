"""Which Keras layer an op belongs to: by name scope (TensorFlow, JAX, torch record_function labels) or, for
oneDNN primitives that carry no names, by shape and order against ``runs[].model.layers``."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fp16doctor.attribution.onednn import OnednnExec, desc_fields, matmul_dims, reorder_dims

Layer = Mapping[str, Any]

# Scopes that are not layers: the gradient tape, the loss, the optimizer.
NON_LAYER_SCOPES = ("gradient_tape", "compile_loss", "loss", "training", "metrics")


def _unique_name(used: dict[str, int], name: str) -> str:
    """TensorFlow's Graph.unique_name (tensorflow/python/framework/ops.py): a name already in use gets the
    first free ``_N`` suffix, counting from the number of times the name was asked for."""
    key = name.lower()
    i = used.get(key, 0)
    used[key] = i + 1
    if i == 0:
        return name
    base = key
    while key in used:
        key = f"{base}_{i}"
        i += 1
    used[key] = 1
    return f"{name}_{i - 1}"


def tf_scope_map(layer_names: Sequence[str], requests_per_layer: int) -> dict[str, str]:
    """Scope name -> layer name when each layer's name scope was asked for ``requests_per_layer`` times, in
    model order, in one graph (Keras 3 on TensorFlow opens each layer's scope twice in a traced train step,
    so its ops sit under ``conv2d_1`` for layer ``conv2d`` and ``conv2d_1_2`` for layer ``conv2d_1``)."""
    used: dict[str, int] = {}
    mapping: dict[str, str] = {}
    for name in layer_names:
        scope = name
        for _ in range(requests_per_layer):
            scope = _unique_name(used, name)
        mapping[scope] = name
    return mapping


class ScopeResolver:
    """Maps op names (``gradient_tape/sequential_1/conv2d_1_2/convolution/Conv2DBackpropFilter``) to layers."""

    def __init__(self, model_layers: Sequence[Layer], op_names: Iterable[str]) -> None:
        self.layers = [layer for layer in model_layers if layer.get("name")]
        names = [str(layer["name"]) for layer in self.layers]
        segments = {seg for op in op_names for seg in re.split(r"[/:]", op)}
        best: dict[str, str] = {name: name for name in names}
        best_hits = len(segments & set(best))
        for repeats in (2, 3):
            candidate = tf_scope_map(names, repeats)
            hits = len(segments & set(candidate))
            if hits > best_hits:
                best, best_hits = candidate, hits
        self.scope_to_layer = best

    def layer_of(self, op_name: str, op_type: str = "") -> str | None:
        layer = None
        for segment in re.split(r"[/:]", op_name):
            if segment in self.scope_to_layer:
                layer = self.scope_to_layer[segment]
                break
        if layer is None:
            return None
        return self._owner(layer, op_type)

    def _owner(self, layer: str, op_type: str) -> str:
        """A fused op is named after its last member (``activation_1/Relu`` for Conv2D+BiasAdd+Relu): give
        its time to the layer that does the work, the nearest matching layer before it."""
        wanted = None
        if "Conv" in op_type:
            wanted = "Conv"
        elif "MatMul" in op_type:
            wanted = "Dense"
        if wanted is None:
            return layer
        index = next(i for i, entry in enumerate(self.layers) if entry["name"] == layer)
        for entry in reversed(self.layers[: index + 1]):
            if wanted in str(entry.get("type", "")):
                return str(entry["name"])
        return layer


# ---------------------------------------------------------------- oneDNN primitives by shape


def _shape(layer: Layer) -> list[int] | None:
    shape = layer.get("output_shape")
    return [int(d) for d in shape] if isinstance(shape, list) else None


def _spatial_matches(layer: Layer, fields: Mapping[str, int]) -> bool:
    """The layer's output height and width are the primitive's (true when the layer's shape is unknown)."""
    shape = _shape(layer)
    return shape is None or shape[:2] == [fields.get("oh"), fields.get("ow")]


def _is(layer: Layer, *kinds: str) -> bool:
    return any(kind in str(layer.get("type", "")) for kind in kinds)


class OnednnLayerMatcher:
    """Assigns oneDNN primitives to layers by shape; where shapes repeat, by order (forward ops in model
    order, backward ops in reverse order)."""

    def __init__(self, model_layers: Sequence[Layer]) -> None:
        self.layers = [layer for layer in model_layers if layer.get("name")]
        self._seen: dict[tuple[tuple[str, ...], str], int] = {}

    def _pick(self, candidates: list[Layer], pass_name: str | None) -> str | None:
        if not candidates:
            return None
        names = tuple(str(layer["name"]) for layer in candidates)
        if len(names) == 1:
            return names[0]
        key = (names, pass_name or "")
        count = self._seen.get(key, 0)
        self._seen[key] = count + 1
        ordered = names if pass_name in ("forward", None) else tuple(reversed(names))
        return ordered[count % len(ordered)]

    def match(self, record: OnednnExec) -> tuple[str | None, str | None]:
        """(layer name or None, pass or None) for one primitive."""
        pass_name = record.pass_hint
        kind = record.primitive
        if kind == "convolution" or kind == "deconvolution":
            f = desc_fields(record.desc)
            cands = [
                layer
                for layer in self.layers
                if _is(layer, "Conv")
                and layer.get("in_channels") == f.get("ic")
                and layer.get("out_channels") == f.get("oc")
                and layer.get("kernel") in (None, [f.get("kh"), f.get("kw")])
                and _spatial_matches(layer, f)
            ]
            return self._pick(cands, pass_name), pass_name
        if kind == "pooling":
            f = desc_fields(record.desc)
            cands = [
                layer
                for layer in self.layers
                if _is(layer, "Pool") and _shape(layer) == [f.get("oh"), f.get("ow"), f.get("ic")]
            ]
            return self._pick(cands, pass_name), pass_name
        if kind == "inner_product":
            f = desc_fields(record.desc)
            cands = [
                layer
                for layer in self.layers
                if _is(layer, "Dense") and layer.get("in_features") == f.get("ic")
                and layer.get("out_features") == f.get("oc")
            ]
            return self._pick(cands, pass_name), pass_name
        if kind == "matmul":
            return self._match_matmul(record)
        if kind == "reorder":
            return self._match_reorder(record), pass_name
        if kind == "eltwise":
            f = desc_fields(record.desc)
            shape = [f.get("ih"), f.get("iw"), f.get("ic")]
            cands = [layer for layer in self.layers if _is(layer, "Activation", "ReLU") and _shape(layer) == shape]
            return self._pick(cands, pass_name), pass_name
        return None, pass_name

    def _match_matmul(self, record: OnednnExec) -> tuple[str | None, str | None]:
        dims = matmul_dims(record.desc)
        if dims is None:
            return None, None
        m, k, n = dims
        for layer in self.layers:
            if not _is(layer, "Dense"):
                continue
            fan_in, units = layer.get("in_features"), layer.get("out_features")
            # y = x W: (mb x in)(in x out); dW = x^T dy: (in x mb)(mb x out); dx = dy W^T: (mb x out)(out x in)
            if k == fan_in and n == units:
                return str(layer["name"]), "forward"
            if m == fan_in and n == units:
                return str(layer["name"]), "backward_weights"
            if k == units and n == fan_in:
                return str(layer["name"]), "backward_data"
        return None, None

    def _match_reorder(self, record: OnednnExec) -> str | None:
        dims = reorder_dims(record.desc)
        if dims is None:
            return None
        if len(dims) == 4:  # weights, OIHW
            cands = [
                layer
                for layer in self.layers
                if _is(layer, "Conv")
                and layer.get("out_channels") == dims[0]
                and layer.get("in_channels") == dims[1]
                and layer.get("kernel") in (None, [dims[2], dims[3]])
            ]
            return self._pick(cands, record.pass_hint) if len(cands) == 1 else None
        if len(dims) == 2:
            cands = [
                layer
                for layer in self.layers
                if _is(layer, "Dense") and {layer.get("in_features"), layer.get("out_features")} == set(dims)
            ]
            return str(cands[0]["name"]) if len(cands) == 1 else None
        return None
