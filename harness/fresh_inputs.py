"""Fresh input values for every timed call, reproducible by the parent and both children.

Timed call i uses trial t's inputs with every floating tensor multiplied element-wise by
`1 - 0.1 * s * roll(pool, k)` (computed without the roll): `pool` is a fixed uniform draw per input position, k and s are drawn per call by the
parent's secret generator. No two calls see the same values (a cache keyed on contents or addresses cannot hit),
signs, zeros and ranges like [0, 1] are kept (the problem's domain holds), and staging costs one pass over memory.
"""

from __future__ import annotations

import random
from typing import Any

Recipe = list[tuple[int, float] | None]  # per input: (roll offset, scale) for floating tensors, else None


def _floating(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel() > 0


def make_pools(inputs: list[Any], seed: int) -> list[Any]:
    import torch

    generator = torch.Generator().manual_seed(seed)
    return [torch.rand(v.numel(), generator=generator) if _floating(v) else None for v in inputs]


def draw_recipe(rng: random.Random, inputs: list[Any]) -> Recipe:
    return [(rng.randrange(v.numel()), rng.uniform(0.05, 1.0)) if _floating(v) else None for v in inputs]


def fresh_inputs(base: list[Any], pools: list[Any], recipe: Recipe, device: str) -> list[Any]:
    """New tensors (on `device`) for one call; the same arguments give bit-identical values everywhere."""
    import torch

    out = []
    for value, pool, step in zip(base, pools, recipe):
        if step is None or pool is None or not _floating(value):
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
    fresh = torch.empty(size, dtype=torch.float32)
    torch.addcmul(flat[:shift], flat[:shift], pool[size - shift:], value=factor, out=fresh[:shift])
    torch.addcmul(flat[shift:], flat[shift:], pool[:size - shift], value=factor, out=fresh[shift:])
    return fresh.to(value.dtype).reshape(value.shape)


def has_fresh_values(inputs: list[Any]) -> bool:
    return any(_floating(v) for v in inputs)
