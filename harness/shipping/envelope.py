"""The shape envelope: is the candidate right at the sizes its callers will send, not only at the problem's own?

A kernel tuned for one shape easily assumes its divisibility (a ReLU that handles 8 elements at a time and drops
the tail is right at 16 x 16384 and wrong at any odd size). `variants()` derives variants of the problem's own
module-level size constants (the ones kernelbench/shrink.py edits): odd sizes, multiples of 8 that are not of 32,
multiples of 32 that are not of 128, a batch of one and a larger batch, each no bigger than about twice the
problem, and each one the reference itself runs at. `check_envelope()` judges the candidate at each with
`evaluate()`, correctness only except at a few variants where it is timed too, and returns an `Envelope`: per
variant the sizes, the verdict, the first reason, the speedup with its interval where timed, and an `[envelope]`
note naming the sizes where the candidate is wrong. The verdict at the problem's own shape (KernelBench's number)
is the caller's evaluation and is never changed here.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Callable, Sequence

from pydantic import BaseModel, Field

from harness.pipeline import evaluate
from harness.policy import EvalPolicy
from harness.records import Check, Evaluation, Finding, Verdict, rendered
from harness.values.tensors import nbytes
from harness.verification.reference import run_reference
from kernelbench.problem import Problem, ProblemError
from kernelbench.shrink import Footprint, _scalable, measure, rewrite_constants, size_constants

Progress = Callable[[str], None]
GROWTH = 2.05  # a variant may cost at most this many times the problem's own bytes and FLOPs
ODD, TILE_8, TILE_32, ONE, LARGER, DECLARED = ("odd sizes", "multiples of 8, not of 32", "multiples of 32, not of 128",
                                               "batch of one", "larger batch", "declared")
TIMED_FIRST = (DECLARED, LARGER, ODD)  # where a speedup is measured, in order of preference
_BATCH = re.compile(r"batch", re.IGNORECASE)
_REASON_CHARS = 200


@dataclass(frozen=True)
class ShapeVariant:
    """The problem at other sizes: `sizes` are its size constants' values there (the ones that vary)."""

    label: str
    sizes: dict[str, int]
    problem: Problem

    @property
    def described(self) -> str:
        return " ".join(f"{name}={value}" for name, value in self.sizes.items())


class VariantResult(BaseModel):
    """The candidate judged at one variant."""

    label: str
    sizes: dict[str, int]
    verdict: Verdict
    reason: str | None = None  # the first reason where the verdict is not accepted
    speedup: float | None = None  # where timed
    speedup_ci: tuple[float, float] | None = None
    seconds: float = 0.0

    @property
    def correct(self) -> bool:
        return self.verdict in (Verdict.ACCEPTED, Verdict.DEGENERATE)


class Envelope(BaseModel):
    """The candidate across the variants of a problem's sizes (the problem's own shape is the caller's
    evaluation): what `--json` carries as `envelope`, what the table and the speedup-by-size plot show."""

    sizes: dict[str, int]  # the problem's own
    variants: list[VariantResult] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list)  # what was not judged, and why (the reference failed there)
    seconds: float = 0.0

    @property
    def wrong(self) -> list[VariantResult]:
        return [v for v in self.variants if not v.correct]

    @property
    def finding(self) -> Finding | None:
        return envelope_finding(self)


def own_sizes(problem: Problem) -> dict[str, int]:
    """The problem's size constants that a variant changes: those the shrink code would scale, and the batch size
    however small."""
    return {c.name: c.value for c in size_constants(problem.source)
            if _scalable(c) or (_BATCH.search(c.name) and c.value >= 1)}


def _odd(value: int) -> int:
    return value - 1 if value % 2 == 0 else value


def _odd_sizes(sizes: dict[str, int]) -> dict[str, int]:
    """Every size odd, and the largest moved down (by less than 128, never below half) so that the product of them
    all is one less than a multiple of 128 where it can be: a kernel that handles 8, 32 or 128 elements at a time
    and drops the rest then drops the most it can (7, 31, 127), not a remainder of 1 that may happen to be right."""
    odd = {name: _odd(value) for name, value in sizes.items()}
    if not odd:
        return odd
    largest = max(odd, key=lambda name: odd[name])
    others = 1
    for name, value in odd.items():
        others = others * value % 128 if name != largest else others
    wanted = 127 * pow(others, -1, 128) % 128  # odd numbers are invertible modulo 128
    moved = odd[largest] - (odd[largest] - wanted) % 128
    if moved >= max(1, sizes[largest] // 2):
        odd[largest] = moved
    return odd


def _multiple_not_of(value: int, step: int, avoid: int) -> int:
    """The largest multiple of `step` at most `value` that is not a multiple of `avoid` (`value` where none)."""
    candidate = value // step * step
    while candidate > 0 and candidate % avoid == 0:
        candidate -= step
    return candidate if candidate > 0 else value


def _batch(sizes: dict[str, int]) -> str | None:
    """The batch size: a size constant named `batch...`; None where the problem names none."""
    return next((name for name in sizes if _BATCH.search(name)), None)


def _proposals(sizes: dict[str, int]) -> list[tuple[str, list[dict[str, int]]]]:
    """Each variant's label and the sizes to try for it, in order: a batch change alone first, then with the sizes
    tied to it (the same value: `batch_size` and `input_shape[0]` broadcast against each other)."""
    whole = [(TILE_8, lambda v: _multiple_not_of(v, 8, 32)),
             (TILE_32, lambda v: _multiple_not_of(v, 32, 128))]
    proposals = [(ODD, [_odd_sizes(sizes), {name: _odd(value) for name, value in sizes.items()}])]
    proposals += [(label, [{name: change(value) for name, value in sizes.items()}]) for label, change in whole]
    name = _batch(sizes)
    if name is not None:
        size = sizes[name]
        for label, value in ((ONE, 1), (LARGER, 2 * size - 1)):
            twins = {n: value for n, v in sizes.items() if v == size}
            proposals.append((label, [{**sizes, name: value}, {**sizes, **twins, name: value}]))
    return proposals


def _footprint(source: str, on_meta: bool = True) -> Footprint | None:
    """What one forward costs at these sizes, on the meta device, or by running the reference on the CPU where the
    meta device cannot run it (bytes only: no FLOPs are counted there); None where the reference fails."""
    if on_meta:
        try:
            return measure(source)
        except ProblemError:
            return None
    try:
        run = run_reference(Problem(name="envelope_variant", source=source), "cpu", 0, [0], vary_distributions=False)
    except ProblemError:
        return None
    params = sum(p.numel() * p.element_size() for p in run.model.parameters())
    return Footprint(nbytes(run.trial_inputs[0]) + nbytes(_tensors(run.outputs[0])) + params, 0.0)


def _tensors(output: object) -> list[object]:
    return [t for part in output for t in _tensors(part)] if isinstance(output, (list, tuple)) else [output]


def _fits(footprint: Footprint, own: Footprint) -> bool:
    return footprint.bytes <= GROWTH * own.bytes and footprint.flops <= GROWTH * max(own.flops, 1.0)


def _variant(problem: Problem, label: str, values: dict[str, int]) -> ShapeVariant:
    source = rewrite_constants(problem.source, values)
    return ShapeVariant(label, values, Problem(name=problem.name, source=source, level=problem.level,
                                               problem_id=problem.problem_id))


def _declared(problem: Problem, shapes: Sequence[dict[str, int]]) -> list[ShapeVariant]:
    """The user's own sizes: every name must be a size constant of the problem, and the reference must run there."""
    constants = {c.name: c.value for c in size_constants(problem.source)}
    found = []
    for shape in shapes:
        unknown = sorted(set(shape) - set(constants))
        if unknown:
            raise ProblemError(f"{problem.key}: {', '.join(unknown)} not among its size constants "
                               f"({', '.join(constants) or 'none'})")
        if any(type(v) is not int or v < 1 for v in shape.values()):
            raise ProblemError(f"{problem.key}: declared sizes must be positive integers: {shape}")
        values = dict(own_sizes(problem), **shape)
        variant = _variant(problem, DECLARED, values)
        if _footprint(variant.problem.source) is None and _footprint(variant.problem.source, on_meta=False) is None:
            raise ProblemError(f"{problem.key}: the reference does not run at the declared sizes "
                               f"{variant.described}")
        found.append(variant)
    return found


def parse_shapes(texts: Sequence[str]) -> list[dict[str, int]]:
    """`--shapes batch_size=1,dim=4097` (the option repeated, or shapes separated by `;`) as declared sizes;
    ValueError naming what is not `name=positive integer`."""
    shapes = []
    for text in (part for given in texts for part in given.split(";") if part.strip()):
        shape = {}
        for pair in (p for p in text.split(",") if p.strip()):
            name, _, value = pair.partition("=")
            if not name.strip() or not value.strip().isdigit() or int(value) < 1:
                raise ValueError(f"--shapes {text.strip()!r}: {pair.strip()!r} is not name=positive integer")
            shape[name.strip()] = int(value)
        shapes.append(shape)
    return shapes


def variants(problem: Problem, shapes: Sequence[dict[str, int]] | None = None) -> list[ShapeVariant]:
    """The sizes to judge a candidate at besides the problem's own: `shapes` where the user declares them
    (ProblemError where a name is no size constant or the reference fails there), else the derived variants,
    each the reference runs at and no bigger than about twice the problem (bytes and FLOPs), without repeats."""
    if shapes:
        return _declared(problem, shapes)
    sizes = own_sizes(problem)
    own, on_meta = _footprint(problem.source), True
    if own is None:  # the meta device cannot run this reference: each variant's is run on the CPU
        own, on_meta = _footprint(problem.source, on_meta=False), False
    if not sizes or own is None:  # nothing to vary, or a reference that does not run: no envelope
        return []
    found: list[ShapeVariant] = []
    seen = [sizes]
    for label, tries in _proposals(sizes):
        for values in tries:
            if values in seen:
                continue
            variant = _variant(problem, label, values)
            footprint = _footprint(variant.problem.source, on_meta)
            if footprint is not None and _fits(footprint, own):
                found.append(variant)
                seen.append(values)
                break
    return found


_derived = variants  # check_envelope's parameter of that name hides the function


def _timed(found: Sequence[ShapeVariant], count: int) -> set[int]:
    """Which variants are timed: the declared ones first, then a larger batch, then odd sizes."""
    order = sorted(range(len(found)), key=lambda i: (TIMED_FIRST.index(found[i].label)
                                                     if found[i].label in TIMED_FIRST else len(TIMED_FIRST), i))
    return set(order[:count])


def _result(variant: ShapeVariant, evaluation: Evaluation, seconds: float) -> VariantResult:
    first = evaluation.reasons[0] if evaluation.reasons and evaluation.verdict is not Verdict.ACCEPTED else ""
    reason = first.strip().split("\n", 1)[0][:_REASON_CHARS]
    return VariantResult(label=variant.label, sizes=variant.sizes, verdict=evaluation.verdict, reason=reason or None,
                         speedup=evaluation.speedup, speedup_ci=evaluation.speedup_ci, seconds=round(seconds, 3))


def _no_variants(problem: Problem) -> str:
    if not own_sizes(problem):
        return "no variant: the problem has no module-level size constant to vary"
    return "no variant: none the reference runs at within twice the problem's size"


def check_envelope(problem: Problem, source: str, device: str = "cpu", policy: EvalPolicy | None = None,
                   variants: Sequence[ShapeVariant] | None = None, timed: int = 1,
                   progress: Progress | None = None) -> Envelope:
    """`source` judged at each variant (`variants(problem)` unless given): correctness everywhere, and a speedup
    at `timed` of them (declared sizes first, then a larger batch, then odd sizes). A variant where the reference
    itself fails is listed in `skipped`; the candidate's failures are its verdicts. Nothing is timed under a
    policy that skips timing. Whether to ask at all (`policy.envelope`) is the caller's choice."""
    started = time.perf_counter()
    policy = policy or EvalPolicy()
    say = progress or (lambda _message: None)
    found = _derived(problem) if variants is None else variants
    checking = policy.model_copy(update={"skip_timing": True, "envelope": False})
    timing = policy.model_copy(update={"envelope": False})
    envelope = Envelope(sizes=own_sizes(problem))
    if not found:
        envelope.skipped.append(_no_variants(problem))
    chosen = set() if policy.skip_timing else _timed(found, timed)
    for index, variant in enumerate(found):
        say(f"envelope: {variant.label} ({variant.described})")
        begun = time.perf_counter()
        try:
            evaluation = evaluate(variant.problem, source, device, timing if index in chosen else checking)
        except ProblemError as exc:
            envelope.skipped.append(f"{variant.label} ({variant.described}): {exc}")
            continue
        envelope.variants.append(_result(variant, evaluation, time.perf_counter() - begun))
    envelope.seconds = round(time.perf_counter() - started, 3)
    return envelope


def envelope_finding(envelope: Envelope) -> Finding | None:
    """An `[envelope]` note naming the sizes where the candidate is wrong (its verdict at the problem's own shape
    stands); None where it is right at every variant judged."""
    wrong = envelope.wrong
    if not wrong:
        return None
    named = "; ".join(f"{' '.join(f'{k}={v}' for k, v in r.sizes.items())} ({r.label}): {r.verdict.value}"
                      + (f", {r.reason}" if r.reason else "") for r in wrong)
    return Finding(
        Check.ENVELOPE, f"wrong at {len(wrong)} of {len(envelope.variants)} other sizes: {named}. The verdict "
        "at the problem's own shape stands; at the sizes named, call the reference", fatal=False, lead=True)


def envelope_ghost(envelope: Envelope) -> Finding | None:
    """`[ghost-kernel]`, deciding, where the knock-out at another size found forward right with every kernel
    function poisoned: its kernel is not what computes its answers there, so the speedup at the problem's own shape
    (where it may have recognised the knock-out) is not credited either. A kernel never called at a size (a guard
    that falls back to PyTorch there) stays the `[envelope]` note's business."""
    ghosts = [r for r in envelope.variants if r.verdict is Verdict.REJECTED and
              (r.reason or "").startswith("[ghost-kernel]") and "poisoned" in (r.reason or "")]
    if not ghosts:
        return None
    named = "; ".join(f"{' '.join(f'{k}={v}' for k, v in r.sizes.items())} ({r.label})" for r in ghosts)
    return Finding(Check.GHOST_KERNEL, f"at {named}, with every function of the candidate's extension poisoned, forward() "
                   "still returned the right answer: its kernel does not compute its output there, so no speedup is "
                   "credited at the problem's own shape either", verdict=Verdict.REJECTED)


def attach_envelope(evaluation: Evaluation, problem: Problem, source: str, device: str, policy: EvalPolicy,
                    shapes: Sequence[dict[str, int]] | None = None, timed: int = 0,
                    progress: Progress | None = None) -> Envelope | None:
    """The envelope of an accepted evaluation, recorded on it: `evaluation.envelope`, and the `[envelope]` note
    among its findings and reasons where the candidate is wrong at some size. Nothing where the policy does not
    ask for it or the candidate was not accepted at its own shape."""
    if not policy.envelope or not evaluation.accepted:
        return None
    envelope = check_envelope(problem, source, device, policy, variants(problem, shapes), timed, progress)
    evaluation.envelope = envelope.model_dump()
    if envelope.finding is not None:
        evaluation.findings.append(envelope.finding)
    ghost = envelope_ghost(envelope)
    if ghost is not None:
        evaluation.verdict = Verdict.REJECTED
        evaluation.findings.insert(0, ghost)
    evaluation.reasons = rendered(evaluation.findings)
    return envelope
