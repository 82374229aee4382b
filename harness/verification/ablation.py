"""Every part of the reference must matter, or the problem is degenerate for it (a semantic check, no tracing).

The reference's forward is run under a TorchFunctionMode that sees every top-level torch call (functions, tensor
methods, `nn.functional`: parameters arrive as their arguments). For each call and each floating tensor argument,
the argument is replaced by random values of its own scale (a zero bias by unit noise); where that changes the
call's own output but the forward's output still passes every trial, that argument's value does not matter at the
problem's own parameters, and a kernel that skips it (and its cost) would pass: the problem is degenerate for it.
This catches a term below the tolerance in any form (`x + 1e-7 * conv(x)`, `torch.addcmul(x, a, b, value=1e-7)`, a
small factor inside a product) and runs on references fx cannot trace (an input-validation `if`).

A perturbation that leaves the call's own output unchanged (shape queries, `empty_like`) says nothing and is
skipped. Where the forward is too slow to try every part within the budget, the parts are checked on a copy of the
problem shrunk until they fit (harness/verification/shrunk_copy.py: same trial seeds, same input distributions), and
the verdict says so. A part that matters on the copy only by a little (its replacement moves the output by under
`BORDERLINE` of its norm) may not matter at the problem's own sizes (a term small only at full size: 2.7e-5 of the
output there, 1e-2 on a copy, skipped at 12-34x before, issue 44): it is judged again at the problem's own sizes
where its trials fit what is left of the budget, else by a second estimate, its full-size magnitude (the copy's
effect scaled by how much its call's output shrinks against the forward's output from the copy to full size), and
the verdict says which; where no copy fits either, as many parts as fit are checked, drawn at random, and the verdict
says how many; where the forward cannot run under the mode at all, the verdict says that. Never a silent skip.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from harness.policy import EvalPolicy
from harness.records import Check, Finding
from harness.values.tensors import cloned, portable, to_device
from harness.verification.clear_failure import passes
from harness.verification.reference import ReferenceRun, reference_threads

BUDGET_S = 20.0  # of reference forwards, for every part together (predicted from one forward)
DEADLINE = 2.0  # times the budget: where the prediction was wrong (a loaded machine), the check stops there
SHRINK_MARGIN = 2.0  # a shrunk copy aims at half the budget: its time is predicted from its sizes alone
BORDERLINE = 0.1  # a part whose replacement moves a copy's output by less than this (norm-wise) is judged at full size
_SHRINK_TRIES = 2  # shrunk again, further, where the first copy's forward is still too slow


@dataclass
class Part:
    call: int  # the index of the top-level torch call in one forward
    argument: int  # which positional argument, counting only tensors
    name: str  # what a reader can find in the reference: the function's name and the argument


@dataclass
class Target:
    """What the parts are checked on: the reference itself, or a copy shrunk where its forward is too slow."""

    reference: ReferenceRun
    device: str
    parts: list[Part]
    forward_s: float  # one forward under the mode, and comparing its output
    shrunk: str = ""  # the size changes, where this is a shrunk copy
    magnitudes: list[float] = field(default_factory=list)  # per call: its output's rms over the forward output's

    def cost_s(self) -> float:
        """Predicted: one forward per part (a part that matters fails its first trial), one per trial for a part
        that does not."""
        return self.forward_s * (len(self.parts) + len(self.reference.trial_inputs))

    def where(self) -> str:
        return f" (on a copy shrunk to {self.shrunk})" if self.shrunk else ""


@dataclass
class Prepared:
    target: Target | None  # None where no forward could be run part by part
    full_forward_s: float = 0.0  # a forward at the problem's own sizes
    unshrunk: str = ""  # why no shrunk copy, where one was needed
    note: Finding | None = None  # where the check cannot run at all
    full: Target | None = None  # the problem at its own sizes, where the target is a shrunk copy


@dataclass
class AblationReport:
    degenerate: list[str] = field(default_factory=list)  # parts whose value does not matter
    at_full_size: list[str] = field(default_factory=list)  # of a copy's borderline parts, how each was judged
    checked: int = 0
    total: int = 0
    note: Finding | None = None  # where not every part could be checked, or not at the problem's own sizes


def _mode_class() -> Any:
    import torch
    from torch.overrides import TorchFunctionMode

    class Recorder(TorchFunctionMode):
        """Counts the top-level calls; at `target` replaces one tensor argument by noise of its scale."""

        def __init__(self, target: Part | None, seed: int, probe: bool = True) -> None:
            super().__init__()
            self.target, self.seed, self.probe = target, seed, probe  # probe: whether the call's output changed
            self.calls: list[tuple[str, list[int | str]]] = []  # (name, floating tensor arguments: position or name)
            self.changed: bool | None = None  # whether the perturbation changed the target call's own output
            self.rms: list[float] = []  # per call (census only): its output's rms

        def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            index = len(self.calls)
            named = [*enumerate(args), *kwargs.items()]
            floating = [key for key, a in named if isinstance(a, torch.Tensor) and a.is_floating_point()
                        and a.numel() > 0]
            self.calls.append((getattr(func, "__name__", str(func)), floating))
            if self.target is None:
                result = func(*args, **kwargs)
                self.rms.append(_rms(result))
                return result
            if self.target.call != index or self.target.argument >= len(floating):
                return func(*args, **kwargs)
            key = floating[self.target.argument]
            changed_args, changed_kwargs = list(args), dict(kwargs)
            if isinstance(key, int):
                changed_args[key] = _noise_like(args[key], self.seed)
            else:
                changed_kwargs[key] = _noise_like(kwargs[key], self.seed)
            result = func(*changed_args, **changed_kwargs)
            if self.probe:
                self.changed = not _same(result, func(*args, **kwargs))
            return result

    return Recorder


def _rms(value: Any) -> float:
    """The rms of a floating tensor (the first of a tuple's), else 0."""
    import torch

    if isinstance(value, (tuple, list)):
        value = next((v for v in value if isinstance(v, torch.Tensor)), None)
    if not isinstance(value, torch.Tensor) or not value.is_floating_point() or not value.numel():
        return 0.0
    rms = float(value.detach().double().pow(2).mean().sqrt())  # (inside the mode's handler: not recorded)
    return rms if rms == rms and rms != float("inf") else 0.0


def _argument(key: int | str) -> str:
    return f"argument {key + 1}" if isinstance(key, int) else f"argument `{key}`"


def _noise_like(tensor: Any, seed: int) -> Any:
    import torch

    generator = torch.Generator().manual_seed(seed)
    scale = float(tensor.detach().double().pow(2).mean().sqrt())
    noise = torch.randn(tensor.shape, generator=generator, dtype=torch.float32)
    return (noise * (scale if scale > 0 else 1.0)).to(dtype=tensor.dtype, device=tensor.device)


def _same(a: Any, b: Any) -> bool:
    import torch

    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a is b or a == b if not isinstance(a, torch.Tensor) else False


def _forward(model: Any, inputs: list[Any], device: str, mode: Any) -> Any:
    import torch

    arguments = to_device(cloned(inputs), device)
    with torch.no_grad():
        with mode:  # only the forward's own calls are counted and replaced
            output = model(*arguments)
        return portable(output)


def _note(message: str) -> Finding:
    return Finding(Check.ABLATION, message, fatal=False)


def _census(reference: ReferenceRun, policy: EvalPolicy, device: str, shrunk: str = "") -> Target:
    """One forward under the mode: its parts and how long it takes (raises where it cannot run under a mode)."""
    census = _mode_class()(None, 0)
    with reference_threads(policy.cpu_threads):
        started = time.perf_counter()
        output = _forward(reference.model, reference.trial_inputs[0], device, census)
        passes(reference.trial_seeds[0], reference.outputs[0], output, policy)  # each part's check compares too
        forward_s = max(time.perf_counter() - started, 1e-6)
    parts = [Part(call, k, f"{_argument(key)} of `{name}` (call {call + 1} of the forward)")
             for call, (name, floating) in enumerate(census.calls) for k, key in enumerate(floating)]
    whole = _rms(output) or 1.0
    return Target(reference, device, parts, forward_s, shrunk, [r / whole for r in census.rms])


def prepare(reference: ReferenceRun, policy: EvalPolicy) -> Prepared:
    """The reference to check part by part: itself where every part fits the budget, else a copy of the problem
    shrunk until they do (harness/verification/shrunk_copy.py); the reference itself where no copy can be made
    (then as many parts as fit are checked, and the note says why)."""
    from harness.verification.shrunk_copy import shrunk_copy

    if reference.model is None or not reference.trial_inputs:
        return Prepared(None, note=_note("the reference has no model or no trials here: whether every part of it "
                                         "matters was not checked"))
    device = next((p.device.type for p in reference.model.parameters()), "cpu")
    try:
        full = _census(reference, policy, device)
    except Exception as exc:  # a forward that refuses to run under a mode: say so
        return Prepared(None, note=_note(f"the reference could not be run part by part ({type(exc).__name__}): "
                                         "whether every part of it matters was not checked"))
    prepared = Prepared(full, full.forward_s, full=full)
    if full.cost_s() <= BUDGET_S:
        prepared.full = None
        return prepared
    ratio = 1.0
    for _ in range(_SHRINK_TRIES):
        ratio *= BUDGET_S / SHRINK_MARGIN / (prepared.target or full).cost_s()
        copy = shrunk_copy(reference, policy, device, ratio)
        if isinstance(copy, str):
            prepared.unshrunk = prepared.unshrunk or copy
            break
        try:
            prepared.target = _census(copy.reference, policy, device, copy.changes)
        except Exception as exc:
            prepared.unshrunk = f"the shrunk copy could not be run part by part ({type(exc).__name__})"
            break
        if prepared.target.cost_s() <= BUDGET_S:
            break
        ratio = copy.ratio
    return prepared


def degenerate_parts(reference: ReferenceRun, policy: EvalPolicy, prepared: Prepared | None = None) -> AblationReport:
    """The parts of the reference whose value does not matter at the problem's own parameters (at a shrunk copy's
    sizes where its forward is too slow for the budget); the note says what could not be checked."""
    prepared = prepared or prepare(reference, policy)
    report = AblationReport(note=prepared.note)
    target = prepared.target
    if target is None:
        return report
    report.total = len(target.parts)
    parts = list(target.parts)
    secrets.SystemRandom().shuffle(parts)  # where not all are checked in time, which ones a candidate cannot know
    found: list[Part] = []
    borderline: list[tuple[Part, float]] = []  # parts that matter on a copy by a little: judged at full size too
    with reference_threads(policy.cpu_threads):
        started = time.perf_counter()
        for part in parts:
            if report.checked and time.perf_counter() - started + target.forward_s > DEADLINE * BUDGET_S:
                break
            degenerate, effect = _degenerate(part, target.reference, policy, target.device, _mode_class())
            if degenerate:
                found.append(part)
            elif effect is not None and effect < BORDERLINE and prepared.full is not None:
                borderline.append((part, effect))
            report.checked += 1
        elapsed = time.perf_counter() - started
    report.degenerate = [f"the reference with {part.name} replaced by noise{target.where()}"
                         for part in sorted(found, key=lambda p: (p.call, p.argument))]
    report.degenerate += _at_full_size(borderline, prepared, policy, DEADLINE * BUDGET_S - elapsed, report)
    report.note = report.note or _coverage_note(report, prepared)
    return report


def _coverage_note(report: AblationReport, prepared: Prepared) -> Finding | None:
    target = prepared.target
    assert target is not None
    own = f"a forward at the problem's own sizes takes {prepared.full_forward_s:.2f} s"
    if report.checked < report.total:
        where = (f"on a copy shrunk to {target.shrunk}, where a forward still takes {target.forward_s:.2f} s"
                 if target.shrunk else f"{own}; no shrunk copy: {prepared.unshrunk}" if prepared.unshrunk else own)
        return _note(f"{report.checked} of the reference's {report.total} parts, drawn at random, were checked for "
                     f"mattering within the budget ({where}): a part left unchecked could be skipped by a kernel "
                     "unnoticed")
    if target.shrunk:
        judged = f"; the copy's borderline parts judged for the problem's own sizes: {'; '.join(report.at_full_size)}" \
            if report.at_full_size else ""
        return _note(f"every part of the reference was checked for mattering on a copy shrunk to fit the budget "
                     f"({target.shrunk}; {own}), not at the problem's own sizes{judged}")
    return None


def _degenerate(part: Part, reference: ReferenceRun, policy: EvalPolicy, device: str, recorder: Any,
                trials: int | None = None) -> tuple[bool, float | None]:
    """Whether every trial (the first `trials`) passes with the part replaced, and the replacement changed what the
    part's call returned; with how far it moved the first trial's output (norm-wise relative), where it did."""
    effect = None
    cases = list(zip(reference.trial_seeds, reference.trial_inputs, reference.outputs))[:trials]
    for index, (seed, inputs, expected) in enumerate(cases):
        # a secret seed: seeded like the trial, the noise was the trial's own input (get_inputs draws with it)
        mode = recorder(part, secrets.randbits(62), probe=index == 0)
        try:
            output = _forward(reference.model, inputs, device, mode)
        except Exception:  # a replacement that breaks the forward: the part matters
            return False, None
        if index == 0 and not mode.changed:
            return False, None  # its value does not reach its own call's output (a shape query): nothing to say
        if index == 0:
            effect = _moved(expected, output)
        if not passes(seed, expected, output, policy):
            return False, effect
    return True, effect


def _moved(expected: Any, output: Any) -> float | None:
    """||output - expected|| / ||expected|| over the first tensor output, None where that means nothing."""
    import torch

    ref = expected[0] if isinstance(expected, (list, tuple)) and expected else expected
    got = output[0] if isinstance(output, (list, tuple)) and output else output
    if not (isinstance(ref, torch.Tensor) and isinstance(got, torch.Tensor)) or ref.shape != got.shape \
            or not ref.is_floating_point():
        return None
    norm = float(ref.double().norm())
    moved = float((got.double() - ref.double()).norm()) / norm if norm > 0 else None
    return moved if moved is not None and moved == moved else None


def _at_full_size(borderline: list[tuple[Part, float]], prepared: Prepared, policy: EvalPolicy, left_s: float,
                  report: AblationReport) -> list[str]:
    """A copy's borderline parts judged at the problem's own sizes: by their trials there while they fit `left_s`,
    else by the full-size magnitude estimate. Returns the ones that do not matter there; `report.at_full_size`
    says how each was judged."""
    from harness.verification.compare import tolerance_for

    full, copy = prepared.full, prepared.target
    if full is None or copy is None or not borderline:
        return []
    if [p.name for p in full.parts] != [p.name for p in copy.parts]:
        report.at_full_size.append("the copy's calls differ from the problem's own: its borderline parts "
                                   f"({', '.join(p.name for p, _ in borderline)}) were judged on the copy only")
        return []
    found = []
    tol = _tolerance(full.reference, policy, tolerance_for)
    with reference_threads(policy.cpu_threads):
        for part, effect in sorted(borderline, key=lambda pe: pe[1]):
            trials = len(full.reference.trial_inputs)
            if left_s >= full.forward_s * trials:
                started = time.perf_counter()
                degenerate, _ = _degenerate(part, full.reference, policy, full.device, _mode_class())
                left_s -= time.perf_counter() - started
                how = "at the problem's own sizes"
            else:
                estimate = effect * _ratio(full, copy, part.call)
                degenerate = estimate <= tol
                how = (f"by its full-size magnitude estimate ({estimate:.2g} of the output; it moved the copy's "
                       f"by {effect:.2g})")
            report.at_full_size.append(f"{part.name}: {'does not matter' if degenerate else 'matters'} {how}")
            if degenerate:
                found.append(f"the reference with {part.name} replaced by noise, {how} (it matters only on the "
                             f"copy shrunk to {copy.shrunk})")
    return found


def _ratio(full: Target, copy: Target, call: int) -> float:
    """How much a call's output shrinks against the forward's output from the copy to full size."""
    if call >= len(full.magnitudes) or call >= len(copy.magnitudes) or copy.magnitudes[call] <= 0:
        return 1.0
    return full.magnitudes[call] / copy.magnitudes[call]


def _tolerance(reference: ReferenceRun, policy: EvalPolicy, tolerance_for: Any) -> float:
    import torch

    first = reference.outputs[0]
    first = first[0] if isinstance(first, (list, tuple)) and first else first
    return tolerance_for(first.dtype if isinstance(first, torch.Tensor) else torch.float32, policy)
