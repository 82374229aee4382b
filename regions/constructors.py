"""How to rebuild a module from its attributes (the constructor call a region's problem writes), and which
modules are pointwise (a fusible chain's tail). A module type not here cannot be extracted; the plan says so."""

from __future__ import annotations

from typing import Any, Callable

from regions.custom import custom_constructor, user_class


def _linear(m: Any) -> str:
    return f"nn.Linear({m.in_features}, {m.out_features}, bias={m.bias is not None})"


def _layer_norm(m: Any) -> str:
    bias = f", bias={m.bias is not None}" if m.elementwise_affine else ""
    shape = tuple(m.normalized_shape)
    return f"nn.LayerNorm({shape!r}, eps={m.eps!r}, elementwise_affine={m.elementwise_affine}{bias})"


def _rms_norm(m: Any) -> str:
    return f"nn.RMSNorm({tuple(m.normalized_shape)!r}, eps={m.eps!r}, elementwise_affine={m.elementwise_affine})"


def _conv(m: Any) -> str:
    return (f"nn.{type(m).__name__}({m.in_channels}, {m.out_channels}, {m.kernel_size!r}, stride={m.stride!r}, "
            f"padding={m.padding!r}, dilation={m.dilation!r}, groups={m.groups}, bias={m.bias is not None}, "
            f"padding_mode={m.padding_mode!r})")


def _plain(m: Any) -> str:
    return f"nn.{type(m).__name__}()"


CONSTRUCTORS: dict[str, Callable[[Any], str]] = {
    "Linear": _linear, "LayerNorm": _layer_norm, "RMSNorm": _rms_norm, "Conv1d": _conv, "Conv2d": _conv,
    "Softmax": lambda m: f"nn.Softmax(dim={m.dim!r})", "LogSoftmax": lambda m: f"nn.LogSoftmax(dim={m.dim!r})",
    "GELU": lambda m: f"nn.GELU(approximate={m.approximate!r})", "ReLU": _plain, "SiLU": _plain,
    "Sigmoid": _plain, "Tanh": _plain, "Mish": _plain, "Hardswish": _plain,
    "LeakyReLU": lambda m: f"nn.LeakyReLU({m.negative_slope!r})", "Dropout": lambda m: f"nn.Dropout({m.p!r})",
}
CHAIN_HEADS = {"Linear", "Conv1d", "Conv2d"}
KNOWN = ("Linear, Conv1d/2d, LayerNorm, RMSNorm, Softmax, LogSoftmax, pointwise activations and leaf modules "
         "defined in the model file that keep their constructor arguments as attributes")
POINTWISE = {"GELU", "ReLU", "SiLU", "Sigmoid", "Tanh", "Mish", "Hardswish", "LeakyReLU", "Dropout"}


def fixed_dims(module: Any, rank: int) -> set[int]:
    """Input dimensions tied to the module's parameters (they stay literal in the problem; the others are size
    constants the envelope may vary)."""
    name = type(module).__name__
    if not type(module).__module__.startswith("torch.nn"):
        return {rank - 1}  # a module of the user's: its last dimension is the features its parameters fit
    if name == "Linear":
        return {rank - 1}
    if name in ("LayerNorm", "RMSNorm"):
        return set(range(rank - len(module.normalized_shape), rank))
    if name in ("Conv1d", "Conv2d"):
        return {1}
    return set()


def constructor(module: Any, source: str | None = None) -> str | None:
    """The constructor call that rebuilds `module` (its parameters' values aside), or None when unknown. An
    in-place activation is unknown: its output aliases its input. `source`: the user's model file, where a leaf
    module's own class may be defined (regions/custom.py)."""
    if getattr(module, "inplace", False):
        return None
    make = CONSTRUCTORS.get(type(module).__name__)
    if make and type(module).__module__.startswith("torch.nn"):
        return make(module)
    return custom_constructor(module) if source is not None and user_class(module, source) else None
