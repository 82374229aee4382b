"""Input distributions per trial. A problem's `get_inputs()` usually draws from one distribution (often
`randn`); kernels that only work there (a skipped sign branch, subsampling, an analytical shortcut) fail when
the same shapes are filled from other distributions. Each keeps the sample's sign and range so the problem's
domain (positive inputs for `log`, probabilities in [0, 1]) still holds, except the signed variant of `uniform`,
used wherever the reference stays finite on it, and `large`: the sample scaled to magnitudes up to 1000 where the
reference handles them (else the sample times 100, in its domain), that numerically unsafe kernels (a softmax
without max-subtraction, a softplus without its threshold) fail, whatever the problem's own scale. Two are
structured, where parts of a tensor differ (issue 44): `block_scaled` (the sample in 16 contiguous blocks, each
scaled by its own factor over three decades) and `ramp` (the sample's own values sorted along the tensor): a kernel
that reads a part and extrapolates (a sum over a subsample, one block's mean for all) fails there. A kernel that
first checks that the parts it reads agree (quarter means within 2%: every i.i.d. sample passes, block_scaled and
ramp do not, so it reads all of those) is met by `sparse`: the sample itself, unchanged but for a few spikes at
random positions (two per row of the last dimension on average), each half a row's absolute mass: nothing in the
part it reads tells it the spikes are in the part it skips (accepted at 1.25-2.28x before, issue 44)."""

from __future__ import annotations

from typing import Any

DISTRIBUTIONS = ("default", "uniform", "heavy_tailed", "spiky", "large", "block_scaled", "ramp", "sparse")
_BLOCKS = 16
_LARGEST = 1000.0  # far past float32 exp()'s overflow at 88.7: a softmax or softplus without its guard fails
_SPIKES_PER_ROW = 2.0  # `sparse`: expected spikes per row of the last dimension (a sampler reading a fraction p of a
# row misses all of a row's k spikes with probability (1-p)^k: two per row leave a 1/16 sampler right on a row of 8
# with probability ~1e-5, a 1/4 one ~1e-3)
_SPIKE_MASS = 0.5  # each spike's magnitude, in a row's absolute mass (sum |x| over the last dimension, averaged)


def _reshape(value: Any, name: str, generator: Any, keep_sign: bool) -> Any:
    import torch

    if not isinstance(value, torch.Tensor) or not value.is_floating_point() or value.numel() < 2:
        return value
    low, high = float(value.min()), float(value.max())
    scale = float(value.float().std()) or 1.0
    shape, dtype = value.shape, value.dtype
    if name == "uniform":
        fresh = torch.rand(shape, generator=generator) * (high - low) + low
    elif name == "heavy_tailed":  # Student-t with 2 degrees of freedom, clipped to keep finite arithmetic
        normal = torch.randn(shape, generator=generator)
        chi = torch.randn((2, *shape), generator=generator).pow(2).sum(0).div(2).sqrt().clamp_min(1e-3)
        fresh = (normal / chi * scale).clamp(-50 * scale, 50 * scale)
    elif name == "spiky":  # mostly near zero, a few large spikes
        fresh = torch.randn(shape, generator=generator) * 0.01 * scale
        spikes = torch.rand(shape, generator=generator) < 0.01
        fresh[spikes] = torch.randn(int(spikes.sum()), generator=generator).sign() * 10 * scale
    elif name == "large" and not keep_sign:  # the widest range a caller sends: |x| up to 1000 whatever the sample's
        fresh = value.double() * (_LARGEST / max(abs(low), abs(high), 1e-30))  # scale ([0, 1] inputs included)
        return fresh.to(device=value.device, dtype=dtype)
    elif name in ("block_scaled", "ramp"):
        return _structured(value, name, generator, high)
    elif name == "sparse":
        return _sparse(value, generator, low)
    elif name == "large":  # large magnitudes: logits around +-100, where an unguarded exp() overflows
        if low >= 0 and high <= 1.0:
            return value  # probabilities: no larger value is in the domain
        fresh = value.double() * 100.0
    else:
        return value
    if name == "uniform" and not keep_sign:  # symmetric around zero: a sign branch cannot be skipped
        bound = max(abs(low), abs(high))
        fresh = (torch.rand(shape, generator=generator) * 2 - 1) * bound
    elif low >= 0:
        fresh = fresh.abs()
        if high <= 1.0:
            fresh = fresh.clamp(0.0, 1.0)
    return fresh.to(device=value.device, dtype=dtype)


def _structured(value: Any, name: str, generator: Any, high: float) -> Any:
    """The sample's own values rearranged (`ramp`: sorted) or scaled block by block (`block_scaled`: factors
    10^[-2, 1], never above 1 for a sample bounded by 1): the domain holds, parts of the tensor differ."""
    import torch

    flat = value.detach().reshape(-1).double().cpu()
    if name == "ramp":
        fresh = flat.sort().values
    else:
        blocks = min(_BLOCKS, flat.numel())
        top = 0.0 if high <= 1.0 else 1.0
        exponents = torch.rand(blocks, generator=generator, dtype=torch.float64) * (top + 2.0) - 2.0
        index = torch.arange(flat.numel()) * blocks // flat.numel()
        fresh = flat * torch.pow(10.0, exponents)[index]
    return fresh.reshape(value.shape).to(device=value.device, dtype=value.dtype)


def _sparse(value: Any, generator: Any, low: float) -> Any:
    """The sample with a few of its elements replaced by spikes (`_SPIKES_PER_ROW`, `_SPIKE_MASS`): positive for a
    non-negative sample, of either sign otherwise, capped where the dtype's range would overflow a row's sum."""
    import torch

    flat = value.detach().reshape(-1).double().cpu()
    row = value.shape[-1] if value.dim() and value.shape[-1] else flat.numel()
    rows = max(flat.numel() // row, 1)
    count = max(1, round(_SPIKES_PER_ROW * rows))
    magnitude = _SPIKE_MASS * float(flat.abs().sum()) / rows or 1.0
    magnitude = min(magnitude, float(torch.finfo(value.dtype).max) / 64)
    positions = torch.randint(flat.numel(), (count,), generator=generator)
    signs = torch.ones(count, dtype=torch.float64) if low >= 0 else \
        torch.randint(2, (count,), generator=generator).double() * 2 - 1
    fresh = flat.clone()
    fresh[positions] = magnitude * signs
    return fresh.reshape(value.shape).to(device=value.device, dtype=value.dtype)


def apply_distribution(inputs: list[Any], name: str, seed: int, keep_sign: bool = True) -> list[Any]:
    """The same shapes and dtypes, values redrawn from `name` (integers, bools and non-tensors untouched).
    With `keep_sign=False`, `uniform` is symmetric around zero even for non-negative samples: the hardening
    for problems whose own inputs never exercise a sign branch (identity passes ReLU on `torch.rand`)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    return [_reshape(value, name, generator, keep_sign) for value in inputs]
