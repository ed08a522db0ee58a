"""Turns a finished torch.profiler.profile into the JSON-able list fp16doctor.attribution reads
(``profile.torch_events`` in the workload's result event). Stdlib only; valid Python 3.5.

One dict per profiled event (``prof.events()``), layer labels and autograd wrappers left out:
  {"name": "aten::convolution_backward", "start_us": 83303.9, "end_us": 84969.6, "self_cpu_us": 1665.7,
   "self_device_us": 0.0, "thread": 1, "shapes": [[2, 8, 14, 14], ...], "dtypes": ["float", ...],
   "layer": "conv2d" | null, "backward": true, "depth": 2, "device_type": "DeviceType.CPU",
   "kernels": [{"name": "sm80_xmma_wgrad_...", "device_us": 12.5}]}
A kernel or copy on the GPU is an event of its own too ("device_type": "DeviceType.CUDA", its start and end on the
device's clock): the attribution counts the device's busy time from those, each once.
``layer`` comes from the nearest enclosing ``record_function(LAYER_PREFIX + layer_name)`` label; backward
ops inherit the layer of the forward op with the same autograd sequence number.
"""

LAYER_PREFIX = "keras_layer/"
_AUTOGRAD_PREFIX = "autograd::engine::evaluate_function"


def _ancestors(event):
    parent = getattr(event, "cpu_parent", None)
    while parent is not None:
        yield parent
        parent = getattr(parent, "cpu_parent", None)


def _layer_label(event):
    for parent in _ancestors(event):
        if parent.name.startswith(LAYER_PREFIX):
            return parent.name[len(LAYER_PREFIX):]
    return None


def _backward_node(event):
    """The autograd node (e.g. ConvolutionBackward0) an op ran under, or None in the forward pass."""
    child = event
    for parent in _ancestors(event):
        if parent.name.startswith(_AUTOGRAD_PREFIX):
            return child
        child = parent
    return None


def _skipped(name):
    return name.startswith(LAYER_PREFIX) or name.startswith(_AUTOGRAD_PREFIX) or name.startswith("ProfilerStep#")


def _number(value):
    try:
        return round(float(value), 3)
    except (TypeError, ValueError):
        return 0.0


def _self_device_us(event):
    # torch >= 2.4 names it self_device_time_total; older releases self_cuda_time_total.
    if hasattr(event, "self_device_time_total"):
        return event.self_device_time_total
    return getattr(event, "self_cuda_time_total", 0.0)


def export_torch_events(prof):
    """prof: a stopped torch.profiler.profile (record_shapes=True gives shapes and dtypes)."""
    events = list(prof.events())
    layer_of_sequence = {}
    for event in events:
        sequence = getattr(event, "sequence_nr", -1)
        if sequence is not None and sequence >= 0 and _backward_node(event) is None:
            layer = _layer_label(event)
            if layer is not None:
                layer_of_sequence.setdefault(sequence, layer)
    exported = []
    for event in events:
        if _skipped(event.name):
            continue
        node = _backward_node(event)
        layer = _layer_label(event)
        if node is not None and layer is None:
            layer = layer_of_sequence.get(getattr(node, "sequence_nr", -1))
        kernels = []
        for kernel in getattr(event, "kernels", None) or []:
            kernels.append({"name": str(getattr(kernel, "name", "")),
                            "device_us": _number(getattr(kernel, "duration", 0.0))})
        time_range = getattr(event, "time_range", None)
        exported.append({
            "name": str(event.name),
            "start_us": _number(getattr(time_range, "start", 0.0)),
            "end_us": _number(getattr(time_range, "end", 0.0)),
            "self_cpu_us": _number(getattr(event, "self_cpu_time_total", 0.0)),
            "self_device_us": _number(_self_device_us(event)),
            "thread": getattr(event, "thread", 0),
            "shapes": [list(shape) for shape in (getattr(event, "input_shapes", None) or [])],
            "dtypes": [str(d) for d in (getattr(event, "input_dtypes", None) or [])],
            "layer": layer,
            "backward": node is not None,
            "depth": len(list(_ancestors(event))),
            "device_type": str(getattr(event, "device_type", "") or ""),
            "kernels": kernels,
        })
    return exported
