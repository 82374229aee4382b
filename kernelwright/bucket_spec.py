"""`export-op --bucket batch_size=1..64,dim=4096`: a shape bucket as the user writes it, parsed with nothing but
the standard library (the CLI checks it before importing torch). Which names are size constants of the problem,
and whether the op can route on them, is kernelwright/export_buckets.py's business."""

from __future__ import annotations

import re
from dataclasses import dataclass

from kernelwright.errors import UsageError

MAX_RANGED = 3  # every corner of a bucket is verified: 2**3 = 8 at most
_PAIR = re.compile(r"^\s*([A-Za-z_][A-Za-z_0-9]*(?:\[\d+\])?)\s*=\s*(\d+)\s*(?:\.\.\s*(\d+)\s*)?$")
EXAMPLE = "e.g. --bucket batch_size=1..64 or --bucket batch_size=1..64,dim=4096"


@dataclass(frozen=True)
class BucketSpec:
    """Size constants and their inclusive ranges (`ranges`, lo < hi), others pinned (`fixed`); the problem's own
    values for every constant not named."""

    ranges: dict[str, tuple[int, int]]
    fixed: dict[str, int]
    origin: str = "declared"  # or "inferred": the hull of the sizes the kernel was verified at

    @property
    def text(self) -> str:
        parts = [f"{name}={lo}..{hi}" for name, (lo, hi) in self.ranges.items()]
        return ",".join(parts + [f"{name}={value}" for name, value in self.fixed.items()])


def parse_bucket(text: str) -> BucketSpec:
    """One `--bucket` value; UsageError naming what is wrong and how to write it."""
    ranges: dict[str, tuple[int, int]] = {}
    fixed: dict[str, int] = {}
    pairs = [p for p in text.split(",") if p.strip()]
    if not pairs:
        raise UsageError(f"--bucket {text!r} is empty ({EXAMPLE})")
    for pair in pairs:
        match = _PAIR.match(pair)
        if match is None:
            raise UsageError(f"--bucket {text!r}: {pair.strip()!r} is not NAME=LOW..HIGH or NAME=N with positive "
                             f"integers ({EXAMPLE})")
        name, low, high = match.group(1), int(match.group(2)), match.group(3)
        if name in ranges or name in fixed:
            raise UsageError(f"--bucket {text!r}: {name} is named twice")
        if low < 1 or (high is not None and int(high) < 1):
            raise UsageError(f"--bucket {text!r}: sizes start at 1 ({pair.strip()!r})")
        if high is None or int(high) == low:
            fixed[name] = low
        elif int(high) < low:
            raise UsageError(f"--bucket {text!r}: {pair.strip()!r} runs backwards; write {name}={high}..{low}")
        else:
            ranges[name] = (low, int(high))
    if not ranges:
        raise UsageError(f"--bucket {text!r} has no range; a bucket needs NAME=LOW..HIGH ({EXAMPLE}; exact sizes "
                         "go to --shapes)")
    if len(ranges) > MAX_RANGED:
        raise UsageError(f"--bucket {text!r} ranges {len(ranges)} sizes; at most {MAX_RANGED} (every corner is "
                         "verified): split it into several --bucket")
    return BucketSpec(ranges, fixed)


def parse_buckets(texts: list[str] | None) -> list[BucketSpec]:
    return [parse_bucket(text) for text in texts or []]
