"""Fresh input values for every timed call, drawn by the parent's secret generator.

Timed call i uses trial t's inputs with every floating tensor multiplied element-wise by
`1 - 0.1 * s * roll(pool, k)` (computed without the roll): `pool` is a fixed uniform draw per input position, k and s
are drawn per call by the parent's secret generator. Integer tensors are redrawn uniformly within the trial's own
range (sorted again where the trial's values are sorted, such as offsets), boolean ones at the trial's density. No
two calls see the same values (a cache keyed on contents or addresses cannot hit), signs, zeros and ranges like
[0, 1] are kept (the problem's domain holds), and making a call's inputs costs one pass over memory. On the CPU
the pools, the recipes and the values never reach a child before the call (the parent writes them into the frozen
child); on CUDA the children still make them from the recipes the parent sends with each batch.
"""

from __future__ import annotations

import random
from typing import Any

Recipe = list[tuple[int, float] | int | None]  # per input: (roll offset, scale) for floating tensors, a seed for
# integer and boolean ones, None for the rest


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
    return [(rng.randrange(v.numel()), rng.uniform(0.05, 1.0)) if _floating(v) else
            rng.randrange(1 << 62) if _discrete(v) else None for v in inputs]


def fresh_inputs(base: list[Any], pools: list[Any], recipe: Recipe, device: str) -> list[Any]:
    """New tensors (on `device`) for one call; the same arguments give bit-identical values everywhere."""
    import torch

    out = []
    for value, pool, step in zip(base, pools, recipe):
        if type(step) is int and _discrete(value):
            out.append(_redrawn(value.cpu(), step).to(device))  # the CPU generator: the same values everywhere
            continue
        if step is None or pool is None or not _floating(value) or type(step) is int:
            out.append(value.clone().to(device) if isinstance(value, torch.Tensor) else value)
            continue
        offset, scale = step
        out.append(_scaled(value, pool, offset, -0.1 * scale).to(device))
    return out


def _scaled(value: Any, pool: Any, offset: int, factor: float) -> Any:
    """value * (1 + factor * roll(pool, offset)) in one pass: the roll is two slices, never materialized (staging
    a batch cost four passes over memory per input, most of a cheap kernel's timing phase)."""
    import torch

    flat = value.reshape(-1).to(torch.float32)
    size = flat.numel()
    shift = offset % size
    fresh = torch.empty(size, dtype=torch.float32, device=flat.device)  # on the device of the inputs and pools
    torch.addcmul(flat[:shift], flat[:shift], pool[size - shift:], value=factor, out=fresh[:shift])
    torch.addcmul(flat[shift:], flat[shift:], pool[:size - shift], value=factor, out=fresh[shift:])
    return fresh.to(value.dtype).reshape(value.shape)


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
