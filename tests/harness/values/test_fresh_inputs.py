"""Every timed call needs its inputs read: an attacker that knows everything a candidate can learn (the trial
bases, the pool, every earlier call, and even this call's roll and scale) still cannot answer a reduction within
the fp32 tolerance without reading the call's values."""

from __future__ import annotations

import random

import pytest
import torch

from harness.records import Check
from harness.values.fresh_inputs import FRESH_PERIOD, FRESH_SPREAD, _times_fresh, draw_recipe, fresh_inputs, make_pools

FP32_RTOL = 1e-4


def _calls(base: list[torch.Tensor], count: int, seed: int) -> tuple[list, list[list[torch.Tensor]]]:
    pools = make_pools(base, seed)
    rng = random.Random(seed)
    recipes = [draw_recipe(rng, base) for _ in range(count)]
    return pools, [fresh_inputs(base, pools, recipe, "cpu") for recipe in recipes], recipes


def _best_guess(base: torch.Tensor, pool: torch.Tensor, step: tuple, power: int) -> float:
    """The attacker's answer to sum(x ** power): the known part exactly, the fresh factor by its expectation."""
    offset, scale, _seed = step
    known = base.reshape(-1) * (1 - 0.1 * scale * torch.roll(pool, -offset))
    law = torch.ones(FRESH_PERIOD)  # the fresh factor's law, learned from the harness's own code
    _times_fresh(law, random.randrange(1 << 62))
    expected = float((law.double() ** power).mean())
    return float((known.double() ** power).sum()) * expected


def _relative_miss(size: int, power: int, seed: int) -> float:
    base = [torch.randn(size, generator=torch.Generator().manual_seed(seed))]
    pools, calls, recipes = _calls(base, 3, seed)
    x = calls[-1][0].double()
    truth = float((x ** power).sum())
    return abs(_best_guess(base[0], pools[0], recipes[-1][0], power) - truth) / abs(truth)


@pytest.mark.proves(Check.FRESH_FACTOR)
def test_a_table_of_earlier_calls_cannot_answer_a_later_one() -> None:
    """Same trial, same roll and scale: the values still differ, element by element."""
    base = [torch.randn(4099, generator=torch.Generator().manual_seed(3))]
    pools = make_pools(base, 3)
    first = fresh_inputs(base, pools, [(17, 0.5, 1)], "cpu")[0]
    second = fresh_inputs(base, pools, [(17, 0.5, 2)], "cpu")[0]
    assert (first != second).float().mean() > 0.99
    again = fresh_inputs(base, pools, [(17, 0.5, 1)], "cpu")[0]
    assert torch.equal(first, again)  # bit-identical for the parent, both children and the full check


@pytest.mark.proves(Check.FRESH_FACTOR)
def test_an_estimate_from_known_bases_misses_the_fp32_tolerance() -> None:
    """A sum of squares (a norm, an MSE) and a plain sum, small and past the fresh period."""
    for size, seed in ((4096, 1), (300_007, 2)):
        for power in (2, 1):
            miss = _relative_miss(size, power, seed)
            assert miss > 3 * FP32_RTOL, (size, power, miss)


def test_the_problems_domain_holds() -> None:
    """Signs, zeros and [0, 1] ranges are kept: the fresh factor lies in [1 - FRESH_SPREAD, 1]."""
    base = [torch.rand(FRESH_PERIOD + 11, generator=torch.Generator().manual_seed(5))]
    base[0][:100] = 0
    _pools, calls, _ = _calls(base, 2, 5)
    x = calls[0][0]
    assert float(x.min()) >= 0 and float(x.max()) <= 1 and bool((x[:100] == 0).all())
    ratio = (x[200:] / base[0][200:]).double()
    assert float(ratio.min()) >= (1 - 0.1) * (1 - FRESH_SPREAD) - 1e-6 and float(ratio.max()) <= 1 + 1e-6
