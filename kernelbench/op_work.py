"""How much work one of PyTorch's operator calls does, in FLOPs, by what it computes (issue 44): the compute census
(harness/child/census.py) adds up the library's calls of a candidate's forward with it, and the reference's forward
is measured with it (kernelbench/shrink.py `measure`), so a kernel's share of the work is one count against another.

In order: torch's FLOP counter where it has a formula (mm, addmm, bmm, baddbmm, convolution, attention, _scaled_mm);
the rest of the matrix-product family by its contracted size (`_CONTRACTIONS`: _addmm_activation, addmv, mv, dot,
addbmm, addr, mkldnn_linear, the integer and packed-weight products...); one FLOP per element of the largest tensor
for an operator whose work is linear in its data (pointwise and reductions by their tags, `_LINEAR` by name);
an operator torch can decompose, by its decomposition's operators (run on the meta device, counted the same way).
Whatever is left is *unknown* compute: the census counts it by the largest work its shapes allow a product
(`bound`: 2 sqrt(a b c) over the two largest inputs and the output, exact for a matrix product, more for anything
else), so an operator with no formula cannot pass for one FLOP per element; the reference's measure counts it per
element (`elements`), so the reference's work is never inflated either: both errors go against the candidate.
"""

from __future__ import annotations

import math
from typing import Any

# the matrix-product family torch's counter has no formula for: {name: (index of the left matrix operand, whether a
# leading batch dimension is summed over too)}; the work is 2 x output elements x the contracted size
_CONTRACTIONS: dict[str, tuple[int, bool]] = {
    "_addmm_activation": (1, False), "addmv": (1, False), "mv": (0, False), "dot": (0, False), "vdot": (0, False),
    "inner": (0, False), "matmul": (0, False), "linear": (0, False), "mkldnn_linear": (0, False),
    "_int_mm": (0, False), "_weight_int8pack_mm": (0, False), "_weight_int4pack_mm": (0, False),
    "_weight_int4pack_mm_for_cpu": (0, False), "fbgemm_linear_fp16_weight": (0, False),
    "fbgemm_linear_fp16_weight_fp32_activation": (0, False), "_mixed_dtypes_linear": (0, False),
    "_sparse_mm": (0, False), "_sparse_addmm": (1, False), "sparse_sampled_addmm": (1, False),
    "addbmm": (1, True), "linalg_vecdot": (0, False),
}
_OUTER = {"addr", "outer", "ger"}  # one product per output element
# linear in their data, with no tag saying so: shapes, indexing, sorting, normalisation, pooling, padding
_LINEAR = {
    "cat", "stack", "hstack", "vstack", "index", "index_select", "gather", "scatter", "scatter_add", "scatter_reduce",
    "index_put", "index_put_", "_index_put_impl_", "index_add", "index_copy", "index_fill", "masked_scatter",
    "masked_select", "take", "put", "embedding", "embedding_bag", "_embedding_bag", "_embedding_bag_forward_only",
    "sort", "topk", "kthvalue", "median", "nanmedian", "mode", "argsort", "msort", "cumsum", "cumprod", "cummax",
    "cummin", "logcumsumexp", "_softmax", "_log_softmax", "softmax", "log_softmax", "native_layer_norm",
    "native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training", "native_group_norm",
    "_fused_rms_norm", "_batch_norm_with_update", "_batch_norm_no_update", "batch_norm", "layer_norm", "group_norm",
    "max_pool1d", "max_pool2d", "max_pool3d", "max_pool2d_with_indices", "max_pool3d_with_indices", "avg_pool1d",
    "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
    "_adaptive_avg_pool2d", "_adaptive_avg_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d",
    "upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d", "upsample_linear1d", "upsample_bilinear2d",
    "upsample_bicubic2d", "upsample_trilinear3d", "_upsample_nearest_exact2d", "constant_pad_nd", "reflection_pad1d",
    "reflection_pad2d", "reflection_pad3d", "replication_pad1d", "replication_pad2d", "replication_pad3d", "flip",
    "roll", "repeat", "repeat_interleave", "tile", "tril", "triu", "diag", "diagonal_copy", "diag_embed", "trace",
    "argmax", "argmin", "max", "min", "aminmax", "unique_dim", "_unique", "_unique2", "unique_consecutive",
    "nonzero", "bucketize", "searchsorted", "histc", "bincount", "one_hot", "pixel_shuffle", "pixel_unshuffle",
    "channel_shuffle", "im2col", "col2im", "fill", "masked_fill", "where", "clamp", "lerp", "addcmul", "addcdiv",
    "dropout", "native_dropout", "bernoulli", "uniform", "normal", "rand", "randn", "randint", "randperm",
    "arange", "linspace", "logspace", "eye", "zero", "_to_copy", "copy", "to", "_pin_memory", "pin_memory",
    "isin", "allclose", "equal", "isnan", "nan_to_num", "sign", "count_nonzero", "all", "any",
}
# bookkeeping, not compute: allocation, views, copies (the census leaves them out, harness/verification/bookkeeping.py)
BOOKKEEPING = {
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "new_empty", "new_empty_strided", "new_zeros", "new_ones", "new_full", "view", "_unsafe_view", "reshape",
    "expand", "permute", "transpose", "t", "contiguous", "as_strided", "slice", "select", "unsqueeze", "squeeze",
    "detach", "alias", "copy_", "clone", "_to_copy", "to", "lift_fresh", "lift_fresh_copy", "split", "chunk",
    "unbind", "flatten", "unflatten", "narrow", "view_as", "expand_as", "resize_", "set_", "fill_", "zero_",
    "_local_scalar_dense", "item", "is_same_size", "_reshape_alias", "split_with_sizes", "sym_size", "sym_stride",
    "sym_numel", "sym_storage_offset",
}
_DEPTH = 3  # nested decompositions followed before a call counts as unknown


def prepare() -> None:
    """Import torch's FLOP counter and decompositions now, and run one decomposition on the meta device (their
    first use imports modules that rebind torch functions: done before anything snapshots them)."""
    import torch
    import torch._decomp  # noqa: F401

    _registry()
    matrix = torch.zeros(2, 2)
    activation = torch.ops.aten._addmm_activation.default
    _decomposed(activation, (torch.zeros(2), matrix, matrix), {}, "bound", 0)


def _registry() -> dict[Any, Any]:
    if not _REGISTRY:
        from torch.utils.flop_counter import FlopCounterMode

        _REGISTRY.update(FlopCounterMode().flop_registry)
    return _REGISTRY


_REGISTRY: dict[Any, Any] = {}
_DECOMPOSED: dict[tuple, float | None] = {}


def _name(func: Any) -> str:
    schema = getattr(func, "_schema", None)
    full = schema.name if schema is not None else str(getattr(func, "__name__", func))
    return full.partition("::")[2] or full


def _tensors(value: Any, floating_only: bool = True) -> list[Any]:
    import torch
    from torch.utils._pytree import tree_leaves

    return [t for t in tree_leaves(value) if isinstance(t, torch.Tensor)
            and (t.is_floating_point() or t.is_complex() or not floating_only)]


def _elements(args: tuple, kwargs: dict[str, Any], out: Any) -> float:
    """One per element of the largest floating tensor it reads or writes (any tensor where none is floating)."""
    tensors = _tensors((args, kwargs, out)) or _tensors((args, kwargs, out), floating_only=False)
    return float(max((t.numel() for t in tensors), default=0))


def _contraction(name: str, args: tuple, out: Any) -> float | None:
    """2 x output elements x the contracted size, for the matrix-product family torch's counter leaves out."""
    import torch

    outputs = _tensors(out, floating_only=False)
    if not outputs:
        return None
    produced = max(t.numel() for t in outputs)
    if name in _OUTER:
        return 2.0 * produced
    index, batched = _CONTRACTIONS[name]
    left = args[index] if len(args) > index else None
    if not isinstance(left, torch.Tensor) or not left.dim():
        return None
    contracted = left.shape[-1] * (left.shape[0] if batched and left.dim() >= 3 else 1)
    return 2.0 * max(produced, 1) * contracted


def _bound(args: tuple, kwargs: dict[str, Any], out: Any) -> float:
    """The most work an operator of these shapes does if it is a product of its two largest inputs: 2 sqrt(a b c)
    (a matrix product's 2 m n k exactly); never under one per element."""
    inputs = sorted((t.numel() for t in _tensors((args, kwargs), floating_only=False)), reverse=True)
    produced = max((t.numel() for t in _tensors(out, floating_only=False)), default=0)
    if not inputs:
        return float(produced)
    first, second = inputs[0], inputs[1] if len(inputs) > 1 else inputs[0]
    return max(2.0 * math.sqrt(float(first) * second * max(produced, 1)), _elements(args, kwargs, out))


def _decomposed(func: Any, args: tuple, kwargs: dict[str, Any], unknown: str, depth: int) -> float | None:
    """The work of the operators torch's decomposition of `func` runs, on meta copies of the arguments; None where
    it has none or it cannot run there."""
    import torch
    from torch._decomp import decomposition_table
    from torch.utils._pytree import tree_map
    from torch.utils._python_dispatch import TorchDispatchMode

    decomposition = decomposition_table.get(func)
    if decomposition is None or depth >= _DEPTH:
        return None
    key = (func, unknown, *((tuple(t.shape), t.dtype) for t in _tensors((args, kwargs), floating_only=False)))
    if key in _DECOMPOSED:
        return _DECOMPOSED[key]
    total = [0.0]

    class Tally(TorchDispatchMode):
        def __torch_dispatch__(self, inner: Any, types: Any, a: tuple = (), k: Any = None) -> Any:
            result = inner(*a, **(k or {}))
            total[0] += op_flops(inner, a, k or {}, result, unknown, depth + 1)
            return result

    meta = (lambda v: v.to("meta") if isinstance(v, torch.Tensor) else v)
    try:
        with Tally(), torch.no_grad():
            decomposition(*tree_map(meta, args), **tree_map(meta, kwargs))
        found: float | None = total[0]
    except Exception:  # data-dependent, or no meta kernel underneath: not counted this way
        found = None
    _DECOMPOSED[key] = found
    return found


def op_flops(func: Any, args: tuple, kwargs: dict[str, Any], out: Any, unknown: str = "bound",
             depth: int = 0) -> float:
    """One call's work in FLOPs (module docstring); `unknown` ("bound" or "elements") says how an operator no rule
    knows is counted."""
    import torch

    name = _name(func)
    if name in BOOKKEEPING or name.endswith("_view") or name.startswith("view"):
        return 0.0
    packet = getattr(func, "overloadpacket", None)
    try:
        if packet in _registry():
            return float(_registry()[packet](*args, **kwargs, out_val=out))
        if name in _CONTRACTIONS or name in _OUTER:
            counted = _contraction(name, args, out)
            if counted is not None:
                return counted
        tags = set(getattr(func, "tags", ()))
        if name.rstrip("_") in _LINEAR or name in _LINEAR or tags & {torch.Tag.pointwise, torch.Tag.reduction}:
            return _elements(args, kwargs, out)
        decomposed = _decomposed(func, args, kwargs, unknown, depth)
        if decomposed is not None:
            return max(decomposed, _elements(args, kwargs, out))
        return _bound(args, kwargs, out) if unknown == "bound" else _elements(args, kwargs, out)
    except Exception:  # a formula that cannot read these arguments: as an operator no rule knows
        try:
            return _bound(args, kwargs, out) if unknown == "bound" else _elements(args, kwargs, out)
        except Exception:
            return 0.0
