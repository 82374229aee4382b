"""Shape buckets for the drop-in op (issue 48 item 8): ranges of the problem's size constants (`batch_size=1..64`)
inside which the exported op runs the kernel, not only at the exact sizes verified.

A bucket is planned (`plan_bucket`): the reference, run on the meta device with each ranged constant at its ends
and middle, shows which input and parameter dimensions follow it (the dimension equals the constant's value) and
that nothing else changes: rank, dtype, contiguity, the constructor's arguments (the op builds the kernel's model
once, with the problem's own arguments, so a size that changes them cannot be bucketed). The op's guard matches a
call against that pattern: every fixed dimension equal, every named dimension inside its range and the same
wherever the constant appears.

A bucket is verified (`verify_bucket`) by the harness's correctness protocol (several trials, fresh seeds, input
distributions, poisoned outputs; `check_envelope`) at every corner of the box and at interior samples: a prime, a
size that is no multiple of 8, and uniform draws, drawn at export time from the operating system's entropy
(`random.SystemRandom`), so a kernel written before the export cannot know them. They are recorded in the op's
manifest (export.json).

What is proven, and what is not: the kernel matched the reference at the sizes sampled. Every other size in the
bucket is inferred: a kernel wrong at a fraction f of the sizes passes k samples with probability (1 - f)^k, and
one wrong at a single size it picks passes almost surely. Sampling catches what is wrong across the board (a
dropped tail, a block size assumed, an edge mishandled: the corners are always checked), not a targeted size.
A bucket inferred from the verified sizes spans only their hull.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from harness.policy import EvalPolicy
from harness.shipping.envelope import Envelope, ShapeVariant, check_envelope
from kernelbench.problem import Problem
from kernelbench.shrink import rewrite_constants, size_constants
from kernelwright.bucket_spec import MAX_RANGED, BucketSpec
from kernelwright.export_signatures import ExportError, signatures

Progress = Callable[[str], None]
DEFAULT_SAMPLES = 4  # interior samples per bucket, besides its corners
DRAWN = "at export, from the operating system's entropy (random.SystemRandom)"
_INTERIOR = ("prime", "not a multiple of 8", "uniform")


@dataclass(frozen=True)
class BucketPlan:
    """A bucket the op can route on: `inputs` ([dims, dtype, contiguous]) and `state` ([dims, dtype]) with each
    dimension an int or the name of the ranged constant it equals."""

    spec: BucketSpec
    inputs: list[list[Any]]
    state: list[list[Any]]

    def sizes(self, values: dict[str, int]) -> dict[str, int]:
        return {**self.spec.fixed, **values}

    def instantiated(self, values: dict[str, int]) -> dict[str, Any]:
        def dims(pattern: list[Any]) -> list[int]:
            return [values[d] if isinstance(d, str) else d for d in pattern]

        return {"inputs": [[dims(e[0]), *e[1:]] for e in self.inputs],
                "state": [[dims(e[0]), *e[1:]] for e in self.state]}


def plan_bucket(problem: Problem, spec: BucketSpec) -> BucketPlan:
    """The bucket's routing pattern; ExportError (a usage error) where a name is no size constant, the reference
    does not run at an end, or the op could not tell a call inside the bucket from one outside."""
    constants = [c.name for c in size_constants(problem.source)]
    unknown = [name for name in (*spec.ranges, *spec.fixed) if name not in constants]
    if unknown:
        raise ExportError(f"--bucket {spec.text}: {', '.join(unknown)} not among {problem.key}'s size constants "
                          f"({', '.join(constants) or 'none'})")
    own = signatures(problem, problem.source, None)
    low = {name: lo for name, (lo, _) in spec.ranges.items()}
    base = _at(problem, spec, low, own)
    pattern = {"inputs": [[list(e[0]), *e[1:]] for e in base["inputs"]],
               "state": [[list(e[0]), *e[1:]] for e in base["state"]]}
    for name, (lo, hi) in spec.ranges.items():
        probes = sorted({lo, (lo + hi) // 2, hi})
        seen = [_at(problem, spec, {**low, name: value}, own) for value in probes]
        for part in ("inputs", "state"):
            for index, entry in enumerate(pattern[part]):
                _follow(spec, name, probes, [s[part][index] for s in seen], entry, f"{part[:-1]} {index}")
    missing = [name for name in spec.ranges if not any(name in e[0] for p in pattern.values() for e in p)]
    if missing:
        raise ExportError(f"--bucket {spec.text}: no input or parameter dimension equals {', '.join(missing)}, so the "
                          "op cannot tell a call inside the bucket from one outside")
    return BucketPlan(spec, pattern["inputs"], pattern["state"])


def _at(problem: Problem, spec: BucketSpec, values: dict[str, int], own: dict[str, Any]) -> dict[str, Any]:
    sizes = {**spec.fixed, **values}
    try:
        found = signatures(problem, rewrite_constants(problem.source, sizes), sizes)
    except ExportError as exc:
        raise ExportError(f"--bucket {spec.text}: {exc}") from None
    if found["init_key"] != own["init_key"]:
        raise ExportError(f"--bucket {spec.text}: at {_described(sizes)} the model's constructor arguments "
                          "(get_init_inputs) change; the op builds the kernel with the problem's own, so only sizes "
                          "of the inputs (batch, sequence, spatial) can be bucketed")
    if found["outputs"] != own["outputs"] or len(found["inputs"]) != len(own["inputs"]) or \
            len(found["state"]) != len(own["state"]):
        raise ExportError(f"--bucket {spec.text}: at {_described(sizes)} the model takes or returns other tensors")
    return found


def _follow(spec: BucketSpec, name: str, probes: list[int], seen: list[list[Any]], entry: list[Any],
            where: str) -> None:
    """Mark the dimensions of `entry` that equal `name` at every probe; refuse any other change."""
    if any(s[1:] != seen[0][1:] or len(s[0]) != len(entry[0]) for s in seen):
        raise ExportError(f"--bucket {spec.text}: {where}'s rank, dtype or contiguity changes with {name}")
    for dim in range(len(entry[0])):
        values = [s[0][dim] for s in seen]
        if values == probes and not isinstance(entry[0][dim], str):
            entry[0][dim] = name
        elif len(set(values)) > 1:
            raise ExportError(f"--bucket {spec.text}: {where}'s dimension {dim} is {values} at {name}={probes}: "
                              f"it changes with {name} but is not {name} itself, so the op cannot route on it")


def draw_samples(spec: BucketSpec, count: int = DEFAULT_SAMPLES,
                 rng: random.Random | None = None) -> list[tuple[str, dict[str, int]]]:
    """Every corner ("edge"), then `count` interior points: a prime, a size that is no multiple of 8, uniform
    draws; each ranged constant drawn on its own, no point twice."""
    rng = rng or random.SystemRandom()
    names = list(spec.ranges)
    points = [("edge", dict(zip(names, corner))) for corner in itertools.product(*spec.ranges.values())]
    for index in range(count):
        kind = _INTERIOR[min(index, len(_INTERIOR) - 1)]
        for _ in range(20):  # a small range may hold fewer distinct points than asked for
            point = {name: _draw(kind, lo, hi, rng) for name, (lo, hi) in spec.ranges.items()}
            if all(point != p for _, p in points):
                points.append((kind, point))
                break
    return points


def _draw(kind: str, lo: int, hi: int, rng: random.Random) -> int:
    if kind == "prime":
        found = [v for v in (rng.randint(lo, hi) for _ in range(200)) if _prime(v)]
        if found:
            return found[0]
    if kind in ("prime", "not a multiple of 8"):
        found = [v for v in (rng.randint(lo, hi) for _ in range(200)) if v % 8]
        if found:
            return found[0]
    return rng.randint(lo, hi)


def _prime(value: int) -> bool:
    return value > 1 and all(value % d for d in range(2, math.isqrt(value) + 1))


def verify_bucket(problem: Problem, source: str, device: str, policy: EvalPolicy, plan: BucketPlan,
                  samples: Sequence[tuple[str, dict[str, int]]], progress: Progress | None = None) -> dict[str, Any]:
    """The candidate judged at every sample by the harness (correctness only); the manifest's record of the
    bucket: its pattern, each sample's sizes, kind and verdict, and whether every one was right."""
    spec = plan.spec
    record: dict[str, Any] = {"bucket": spec.text, "origin": spec.origin,
                              "ranges": {n: list(r) for n, r in spec.ranges.items()}, "fixed": dict(spec.fixed),
                              "inputs": plan.inputs, "state": plan.state, "drawn": DRAWN, "samples": []}
    found, own = [], signatures(problem, problem.source, None)["init_key"]
    for kind, values in samples:
        sizes = plan.sizes(values)
        try:
            shifted = signatures(problem, rewrite_constants(problem.source, sizes), sizes)
        except ExportError as exc:  # the reference itself fails there (a size it cannot divide, say)
            return _refused(record, samples, str(exc))
        if {k: shifted[k] for k in ("inputs", "state")} != plan.instantiated(values) or \
                shifted["init_key"] != own:
            return _refused(record, samples, f"at {_described(sizes)} the reference's shapes or constructor "
                            "arguments are not the bucket's; the op cannot route on it")
        variant = Problem(name=problem.name, source=rewrite_constants(problem.source, sizes), level=problem.level,
                          problem_id=problem.problem_id)
        found.append(ShapeVariant(f"bucket {spec.text}, {kind}", sizes, variant))
    checking = policy.model_copy(update={"skip_timing": True})
    envelope = check_envelope(problem, source, device, checking, found, timed=0, progress=progress)
    judged = {_described(v.sizes): v for v in envelope.variants}
    for (kind, values), variant in zip(samples, found):
        result = judged.get(_described(variant.sizes))
        record["samples"].append({"kind": kind, "sizes": values, "verdict": result.verdict.value if result else
                                  "not judged", "reason": result.reason if result else None})
    wrong = [s for s in record["samples"] if s["verdict"] not in ("accepted", "degenerate")]
    why = None
    if wrong:
        why = "; ".join(f"{_described(s['sizes'])} ({s['kind']}): {s['verdict']}" + (f", {s['reason']}" if s["reason"]
                        else "") for s in wrong)
    return {**record, "verified": not wrong, "why_not": why}


def _refused(record: dict[str, Any], samples: Sequence[tuple[str, dict[str, int]]], why: str) -> dict[str, Any]:
    judged = [{"kind": kind, "sizes": values, "verdict": "not judged", "reason": None} for kind, values in samples]
    return {**record, "samples": judged, "verified": False, "why_not": why}


def infer_spec(problem: Problem, verified: Sequence[dict[str, int]]) -> BucketSpec | None:
    """The hull of the sizes the kernel was verified at, over the constants the op can route on (batch first, at
    most three); None where no such constant varies."""
    own = {c.name: c.value for c in size_constants(problem.source)}
    seen = {name: sorted({sizes.get(name, value) for sizes in verified}) for name, value in own.items()}
    varying = sorted((name for name, values in seen.items() if len(values) > 1), key=lambda n: "batch" not in n)
    routable = []
    for name in varying:
        spec = BucketSpec({name: (seen[name][0], seen[name][-1])}, {}, "inferred")
        try:
            plan_bucket(problem, spec)
        except ExportError:
            continue
        routable.append(name)
    for count in range(min(len(routable), MAX_RANGED), 0, -1):
        spec = BucketSpec({n: (seen[n][0], seen[n][-1]) for n in routable[:count]}, {}, "inferred")
        try:
            plan_bucket(problem, spec)
            return spec
        except ExportError:
            continue
    return None


def inferred_buckets(problem: Problem, source: str, device: str, policy: EvalPolicy, envelope: Any,
                     samples: int = DEFAULT_SAMPLES, progress: Progress | None = None) -> list[dict[str, Any]]:
    """The bucket inferred from an envelope (an `Envelope` or its dump: the problem's own sizes and every variant
    judged correct), verified; none where no size the op can route on varies."""
    if envelope is None:
        return []
    judged = envelope if isinstance(envelope, Envelope) else Envelope.model_validate(envelope)
    spec = infer_spec(problem, [dict(judged.sizes)] + [dict(v.sizes) for v in judged.variants if v.correct])
    if spec is None:
        return []
    plan = plan_bucket(problem, spec)
    return [verify_bucket(problem, source, device, policy, plan, draw_samples(spec, samples), progress)]


def _described(sizes: dict[str, int]) -> str:
    return " ".join(f"{name}={value}" for name, value in sizes.items())
