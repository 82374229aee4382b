"""Fresh input values for every timed call, drawn by the parent's secret generator.

Timed call i uses trial t's inputs with every floating tensor multiplied element-wise by
`(1 - 0.1 * s * roll(pool, k)) * (1 - 0.5 * u)`: `pool` is a fixed uniform draw per input position, k, s and the seed
of u are drawn per call by the parent's secret generator, and u is a fresh uniform draw for that call alone, one value
per element up to FRESH_PERIOD elements and repeating with that (prime) period beyond. The fresh factor is what makes
every timed call need its inputs read: the bases (the trials' inputs) and the pool can be learned by a candidate
that watches a few calls, but no table of earlier calls answers a later one, because each element carries a value
that did not exist before the call (on a tensor longer than the period, a table would need an entry per residue
and per roll: period x size values). The factor's spread is what defeats an estimate instead of a table: a
candidate that knows the bases and the pool and replaces u by its mean misses a sum of squares by about
0.38 / sqrt(min(size, period)) relative, 7e-4 at least, seven times the fp32 tolerance (not the 1e-2 of fp16/bf16). Integer tensors are redrawn uniformly within the trial's own range (sorted
again where the trial's values are sorted, such as offsets), boolean ones at the trial's density. Signs, zeros
and ranges like [0, 1] are kept (the problem's domain holds), and making a call's inputs costs two passes over
memory plus drawing at most FRESH_PERIOD uniforms per input. On the CPU the pools, the recipes and the values never
reach a child before the call (the parent writes them into the frozen child); on CUDA the children still make them
from the recipes the parent sends with each batch.
"""

from __future__ import annotations

import random
from typing import Any

from harness.defences import is_off

Recipe = list[tuple[int, float, int] | int | None]  # per input: (roll offset, scale, fresh seed) for floating
# tensors, a seed for integer and boolean ones, None for the rest

FRESH_PERIOD = 262139  # fresh uniforms per floating input per call (a prime under 2**18: no tile lines up with a shape)
FRESH_SPREAD = 0.5  # the fresh factor lies in [1 - FRESH_SPREAD, 1]


def _floating(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel() > 0


def make_pools(inputs: list[Any], seed: int) -> list[Any]:
    import torch

    generator = torch.Generator().manual_seed(seed)
    return [torch.rand(v.numel(), generator=generator) if _floating(v) else None for v in inputs]


def _discrete(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor) and not value.is_floating_point() and not value.is_complex() \
        and value.numel() > 1


def draw_recipe(rng: random.Random, inputs: list[Any]) -> Recipe:
    return [(rng.randrange(v.numel()), rng.uniform(0.05, 1.0), rng.randrange(1 << 62)) if _floating(v) else
            rng.randrange(1 << 62) if _discrete(v) else None for v in inputs]


def fresh_inputs(base: list[Any], pools: list[Any], recipe: Recipe, device: str) -> list[Any]:
    """New tensors (on `device`) for one call; the same arguments give bit-identical values everywhere."""
    import torch

    out = []
    for value, pool, step in zip(base, pools, recipe):
        if type(step) is int and _discrete(value) and not is_off("fresh_integers"):
            out.append(_redrawn(value.cpu(), step).to(device))  # the CPU generator: the same values everywhere
            continue
        if step is None or pool is None or not _floating(value) or type(step) is int:
            out.append(value.clone().to(device) if isinstance(value, torch.Tensor) else value)
            continue
        offset, scale, seed = step
        out.append(_scaled(value, pool, offset, -0.1 * scale, seed).to(device))
    return out


def _scaled(value: Any, pool: Any, offset: int, factor: float, seed: int) -> Any:
    """value * (1 + factor * roll(pool, offset)) * (1 - FRESH_SPREAD * u) with u fresh (see the module's docstring). The roll
    is two slices, never materialized (staging a batch cost four passes over memory per input, most of a cheap
    kernel's timing phase); u comes from the CPU generator, so the same seed gives the same values on any device."""
    import torch

    flat = value.reshape(-1).to(torch.float32)
    size = flat.numel()
    shift = offset % size
    fresh = torch.empty(size, dtype=torch.float32, device=flat.device)  # on the device of the inputs and pools
    torch.addcmul(flat[:shift], flat[:shift], pool[size - shift:], value=factor, out=fresh[:shift])
    torch.addcmul(flat[shift:], flat[shift:], pool[:size - shift], value=factor, out=fresh[shift:])
    _times_fresh(fresh, seed)
    return fresh.to(value.dtype).reshape(value.shape)


def _times_fresh(flat: Any, seed: int) -> None:
    """flat *= 1 - FRESH_SPREAD * u, u uniform and new for this seed, tiled with period FRESH_PERIOD beyond it."""
    import torch

    if is_off("fresh_factor"):
        return
    period = min(flat.numel(), FRESH_PERIOD)
    uniform = torch.rand(period, generator=torch.Generator().manual_seed(seed))
    factor = uniform.mul_(-FRESH_SPREAD).add_(1.0).to(flat.device)
    whole, rest = divmod(flat.numel(), period)
    flat[:whole * period].view(whole, period).mul_(factor)
    flat[whole * period:].mul_(factor[:rest])


def _redrawn(value: Any, seed: int) -> Any:
    """Integers uniform in [min, max] of `value` (sorted along the last dimension where `value` is), booleans at
    its density: within any range the problem's own sample respects, never the same values twice."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    if value.dtype == torch.bool:
        return torch.rand(value.shape, generator=generator) < value.float().mean()
    low, high = int(value.min()), int(value.max())
    fresh = torch.randint(low, high + 1, value.shape, generator=generator, dtype=torch.int64).to(value.dtype)
    if value.dim() and bool((value.diff(dim=-1) >= 0).all()):
        fresh = fresh.sort(dim=-1).values
    return fresh


def has_fresh_values(inputs: list[Any]) -> bool:
    return any(_floating(v) for v in inputs)
