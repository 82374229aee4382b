"""Contrastive exemplars (CUDA-L1): earlier accepted kernels of one problem from *different* score buckets, so
the coder sees slow and fast solutions side by side and is asked why one is faster."""

from __future__ import annotations

import math
import random
from typing import Sequence, TypeVar

T = TypeVar("T")
BUCKET_EDGES = (0.5, 0.9, 1.1, 2.0, 4.0)  # speedup boundaries: much slower ... parity ... much faster


def bucket_of(speedup: float) -> int:
    return sum(speedup >= edge for edge in BUCKET_EDGES)


def select_exemplars(items: Sequence[tuple[T, float]], k: int, temperature: float = 1.0,
                     rng: random.Random | None = None) -> list[tuple[T, float]]:
    """Up to `k` of `(item, speedup)`, one per bucket, buckets spread from slowest to fastest. Within a bucket an item is
    drawn with probability proportional to exp(log2(speedup) / temperature): faster kernels are likelier,
    and temperature -> 0 always takes the fastest."""
    rng = rng or random.Random(0)
    buckets: dict[int, list[tuple[T, float]]] = {}
    for item, speedup in items:
        if speedup > 0 and math.isfinite(speedup):
            buckets.setdefault(bucket_of(speedup), []).append((item, speedup))
    return [_draw(buckets[bucket], temperature, rng) for bucket in _spread(sorted(buckets), k)]


def _spread(ordered: list[int], k: int) -> list[int]:
    """k buckets spread over the range (always the slowest and the fastest), not just the top k."""
    if k <= 0:
        return []
    if len(ordered) <= k:
        return ordered
    if k == 1:
        return [ordered[-1]]
    return sorted({ordered[round(i * (len(ordered) - 1) / (k - 1))] for i in range(k)})


def _draw(members: list[tuple[T, float]], temperature: float, rng: random.Random) -> tuple[T, float]:
    if temperature <= 1e-6:
        return max(members, key=lambda m: m[1])
    scores = [math.log2(speedup) / temperature for _, speedup in members]
    top = max(scores)
    weights = [math.exp(s - top) for s in scores]
    return rng.choices(members, weights=weights, k=1)[0]
