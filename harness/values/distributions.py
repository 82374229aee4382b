"""Input distributions per trial. A problem's `get_inputs()` usually draws from one distribution (often
`randn`); kernels that only work there (a skipped sign branch, subsampling, an analytical shortcut) fail when
the same shapes are filled from other distributions. A kernel must be right wherever the reference is defined,
not only on the problem's own range: an exp polynomial exact on [-1, 1] met every trial of a `torch.rand` problem
(accepted at 1.13x, issue 44), since every distribution kept the sample's range. So two reach past it, each tried
widest first and narrowed only where the reference stops being finite (harness/verification/reference.py): `uniform`
spans `WIDE` times the sample's largest magnitude, symmetric around zero (else with the sample's sign, for a
reference defined on one side: `log`), before the sample's own range; and `large` scales the sample to magnitudes
up to 1000 (then 300, 100, 30, 10: the largest the reference handles; its signs flipped at random first where
the sample has one sign), so numerically unsafe kernels (a softmax without max-subtraction, a softplus without
its threshold) and approximations good on a small range fail, whatever the problem's own scale. `heavy_tailed`
and `spiky` keep the sample's sign and range (probabilities in [0, 1] stay probabilities). Two are structured,
where parts of a tensor differ (issue 44): `block_scaled` (the sample in 16 contiguous blocks, each scaled by its
own factor over three decades) and `ramp` (the sample's own values sorted along the tensor): a kernel that reads a
part and extrapolates (a sum over a subsample, one block's mean for all) fails there. A kernel that first checks
that the parts it reads agree (quarter means within 2%: every i.i.d. sample passes, block_scaled and ramp do not,
so it reads all of those) is met by `sparse`: the sample itself, unchanged but for a few spikes at
random positions (two per row of the last dimension on average), each half a row's absolute mass: nothing in the
part it reads tells it the spikes are in the part it skips (accepted at 1.25-2.28x before, issue 44)."""

from __future__ import annotations

from typing import Any

DISTRIBUTIONS = ("default", "uniform", "heavy_tailed", "spiky", "large", "block_scaled", "ramp", "sparse")
_BLOCKS = 16
_SPIKES_PER_ROW = 2.0  # `sparse`: expected spikes per row of the last dimension (a sampler reading a fraction p of a
# row misses all of a row's k spikes with probability (1-p)^k: two per row leave a 1/16 sampler right on a row of 8
# with probability ~1e-5, a 1/4 one ~1e-3)
_SPIKE_MASS = 0.5  # each spike's magnitude, in a row's absolute mass (sum |x| over the last dimension, averaged)
WIDE = 4.0  # `uniform` first reaches this many times the sample's largest magnitude
LARGE = (1000.0, 300.0, 100.0, 30.0, 10.0)  # `large`'s magnitudes, widest first: 1000 is far past float32 exp()'s
# overflow at 88.7 (a softmax or softplus without its guard fails), 30 still inside it (an approximation of exp
# good on a small range fails)


def _reshape(value: Any, name: str, generator: Any, keep_sign: bool, reach: float) -> Any:
    import torch

    if not isinstance(value, torch.Tensor) or not value.is_floating_point() or value.numel() < 2:
        return value
    low, high = float(value.min()), float(value.max())
    scale = float(value.float().std()) or 1.0
    bound = max(abs(low), abs(high))
    shape, dtype = value.shape, value.dtype
    if name == "uniform" and not keep_sign:  # symmetric around zero: a sign branch cannot be skipped
        fresh = (torch.rand(shape, generator=generator) * 2 - 1) * (bound * reach)
        return fresh.to(device=value.device, dtype=dtype)
    if name == "uniform" and reach != 1.0:  # the sample's sign, `reach` times its range
        fresh = torch.rand(shape, generator=generator) * (high - low) + low
        return (fresh * reach).to(device=value.device, dtype=dtype)
    if name == "large":  # the sample scaled to magnitudes up to `reach`, whatever its own scale ([0, 1] included)
        fresh = value.double() * (reach / max(bound, 1e-30))
        if not keep_sign and (low >= 0 or high <= 0):  # a sample of one sign: both signs
            fresh = fresh * torch.randint(0, 2, shape, generator=generator).mul(2).sub(1).to(fresh.device)
        return fresh.to(device=value.device, dtype=dtype)
    if name in ("block_scaled", "ramp"):
        return _structured(value, name, generator, high)
    if name == "sparse":
        return _sparse(value, generator, low)
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
    else:
        return value
    if low >= 0:
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


def apply_distribution(inputs: list[Any], name: str, seed: int, keep_sign: bool = True,
                       reach: float | None = None) -> list[Any]:
    """The same shapes and dtypes, values redrawn from `name` (integers, bools and non-tensors untouched).
    With `keep_sign=False`, `uniform` is symmetric around zero and `large` has both signs even for non-negative
    samples: the hardening for problems whose own inputs never exercise a sign branch (identity passes ReLU on
    `torch.rand`). `reach`: `uniform`'s span in multiples of the sample's (1: its own range), `large`'s magnitude
    (`LARGE[0]` unless given)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    reach = reach if reach is not None else LARGE[0] if name == "large" else 1.0
    return [_reshape(value, name, generator, keep_sign, reach) for value in inputs]


def one_signed(inputs: list[Any]) -> bool:
    """Whether a floating input tensor holds values of one sign only (`torch.rand`'s): `large` then tries both."""
    import torch

    return any(isinstance(v, torch.Tensor) and v.is_floating_point() and v.numel() >= 2
               and (float(v.min()) >= 0 or float(v.max()) <= 0) for v in inputs)
