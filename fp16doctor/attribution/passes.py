"""Which pass of the training step an op belongs to, from its type and name (TensorFlow, PyTorch)."""

from __future__ import annotations

import re

PASSES = ("forward", "backward_data", "backward_weights", "optimizer", "cast", "layout", "input", "other")

# TensorFlow optimizer kernels (tensorflow/core/ops/training_ops.cc: ApplyRMSProp, ResourceApplyAdam ...) and
# the variable updates Keras 3 optimizers emit as plain ops.
_TF_OPTIMIZER_TYPE = re.compile(r"^(_Mkl)?(Resource)?(Sparse)?Apply[A-Z]|^Assign(Add|Sub)VariableOp$")
# Keras optimizer name scopes (Keras 3 snake-cases the class name: RMSprop -> rm_sprop).
OPTIMIZER_SCOPE = re.compile(
    r"^(rm_?s_?prop|adam_?w?|sgd|adagrad|adadelta|adamax|nadam|ftrl|lion|lamb|adafactor|loss_scale_optimizer|"
    r"training|optimizer)(_\d+)?$",
    re.IGNORECASE,
)
_TF_CAST = re.compile(r"^(_Mkl)?(Cast|_FusedCast)$|^Bitcast$")
_TF_LAYOUT = re.compile(r"^(_Mkl)?(Native)?(Transpose|ConjugateTranspose|DataFormatVecPermute|DataFormatDimMap)$|"
                        r"MklToTf|^(_Mkl)?Reorder")
_TF_INPUT = re.compile(
    r"^(IteratorGetNext|IteratorGetNextSync|IteratorGetNextAsOptional|OptionalGetValue|"
    r"MultiDeviceIteratorGetNextFromShard|Infeed\w*|_Recv|_HostRecv|Dataset\b)"
)


# The function-call ops a tf.function's body runs under (TF 2.x traces name its ops
# "StatefulPartitionedCall/gradient_tape/..."): not a scope of the model's.
_TF_CALL_SCOPE = re.compile(r"^((Stateful)?PartitionedCall(_\d+)?/)+")


def tf_pass(op_name: str, op_type: str) -> str:
    """Pass of a TensorFlow op (graph or eager), from its type and its name scope."""
    bare = re.sub(r"^_(Mkl)?(Native)?", "", op_type)
    op_name = _TF_CALL_SCOPE.sub("", op_name)
    top = op_name.split("/", 1)[0]
    if _TF_INPUT.search(op_type) or top.startswith("IteratorGetNext"):
        return "input"
    if _TF_CAST.search(op_type):
        return "cast"
    if _TF_LAYOUT.search(op_type):
        return "layout"
    # TF1 Keras puts gradients under training/<Optimizer>/gradients/: a gradient before an optimizer scope.
    gradient = top == "gradient_tape" or "_grad/" in op_name or "/gradients/" in op_name or top == "gradients"
    if _TF_OPTIMIZER_TYPE.search(bare) or (not gradient and OPTIMIZER_SCOPE.match(top)):
        return "optimizer"
    if "BackpropFilter" in bare or bare.startswith("BiasAddGrad"):
        return "backward_weights"
    if "BackpropInput" in bare or (gradient and bare.endswith("Grad")):
        return "backward_data"
    if gradient:
        # tensorflow/python/ops/math_grad.py _MatMulGrad: grad_a = MatMul(grad, b), then grad_b = MatMul(a, grad),
        # so the gradient scope's second MatMul ("MatMul_1") is the weight gradient.
        if "MatMul" in bare:
            return "backward_weights" if re.search(r"/MatMul_1$", op_name) else "backward_data"
        return "backward_data"
    if bare.endswith("Grad"):
        return "backward_data"
    return "forward"


# PyTorch (aten) ops, torch.optim and autograd names.
_TORCH_OPTIMIZER = re.compile(r"^aten::_foreach_|^aten::_fused_(adam|sgd|adagrad)|addcdiv_|addcmul_|^Optimizer\.")
_TORCH_CAST = re.compile(r"^aten::(to|_to_copy|_to_dtype|type_as)$")
_TORCH_LAYOUT = re.compile(r"^aten::(permute|transpose|t|contiguous|clone|copy_|_copy_from|to_mkldnn|to_dense)$")


def torch_pass(name: str, backward: bool, input_dtypes: tuple[str, ...] = ()) -> str:
    """Pass of a torch op: ``backward`` says it ran under autograd's backward engine."""
    if _TORCH_OPTIMIZER.search(name):
        return "optimizer"
    if _TORCH_CAST.search(name):
        return "cast"
    if _TORCH_LAYOUT.search(name):
        return "layout"
    if "DataLoader" in name or name.startswith("enumerate(DataLoader"):
        return "input"
    if name in ("aten::convolution_backward", "ConvolutionBackward0"):
        return "backward_data"  # one op computes both gradients; its kernels tell them apart
    if backward:
        return "backward_data"
    return "forward"


def onednn_torch_pass(kernel_name: str, default: str) -> str:
    """cuDNN kernel names tell the weight gradient (wgrad) from the data gradient (dgrad)."""
    lowered = kernel_name.lower()
    if "wgrad" in lowered or "bwd_filter" in lowered or "bwd_w" in lowered:
        return "backward_weights"
    if "dgrad" in lowered or "bwd_data" in lowered:
        return "backward_data"
    return default


def kernel_pass(kernel_name: str) -> str | None:
    """A device activity's pass from its own name, where it says one: cuDNN's wgrad / dgrad kernels, PyTorch's
    ``*_backward_*`` kernels, the host-to-device copy that brings a batch; None where the name does not say."""
    if kernel_name.startswith("Memcpy HtoD"):
        return "input"
    named = onednn_torch_pass(kernel_name, "")
    if named:
        return named
    return "backward_data" if "backward" in kernel_name.lower() else None
