"""Every part of the reference must matter, or the problem is degenerate for it (a semantic check, no tracing).

The reference's forward is run under a TorchFunctionMode that sees every top-level torch call (functions, tensor
methods, `nn.functional`: parameters arrive as their arguments). For each call and each floating tensor argument,
the argument is replaced by random values of its own scale (a zero bias by unit noise); where that changes the
call's own output but the forward's output still passes every trial, that argument's value does not matter at the
problem's own parameters, and a kernel that skips it (and its cost) would pass: the problem is degenerate for it.
This catches a term below the tolerance in any form (`x + 1e-7 * conv(x)`, `torch.addcmul(x, a, b, value=1e-7)`, a
small factor inside a product) and runs on references fx cannot trace (an input-validation `if`).

A perturbation that leaves the call's own output unchanged (shape queries, `empty_like`) says nothing and is
skipped. Where the forward is too slow to try every part within the budget, what was checked is said, never skipped
silently.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from harness.policy import EvalPolicy
from harness.records import Finding
from harness.values.tensors import cloned, portable, to_device
from harness.verification.compare import compare_trial
from harness.verification.reference import ReferenceRun, reference_threads

BUDGET_S = 20.0  # of reference forwards, for every part together
MOST_PARTS = 64


@dataclass
class Part:
    call: int  # the index of the top-level torch call in one forward
    argument: int  # which positional argument, counting only tensors
    name: str  # what a reader can find in the reference: the function's name and the argument


@dataclass
class AblationReport:
    degenerate: list[str] = field(default_factory=list)  # parts whose value does not matter
    checked: int = 0
    total: int = 0
    note: Finding | None = None  # where not every part could be checked


def _mode_class() -> Any:
    import torch
    from torch.overrides import TorchFunctionMode

    class Recorder(TorchFunctionMode):
        """Counts the top-level calls; at `target` replaces one tensor argument by noise of its scale."""

        def __init__(self, target: Part | None, seed: int) -> None:
            super().__init__()
            self.target, self.seed = target, seed
            self.calls: list[tuple[str, list[int | str]]] = []  # (name, floating tensor arguments: position or name)
            self.changed: bool | None = None  # whether the perturbation changed the target call's own output

        def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            index = len(self.calls)
            named = [*enumerate(args), *kwargs.items()]
            floating = [key for key, a in named if isinstance(a, torch.Tensor) and a.is_floating_point()
                        and a.numel() > 0]
            self.calls.append((getattr(func, "__name__", str(func)), floating))
            if self.target is None or self.target.call != index or self.target.argument >= len(floating):
                return func(*args, **kwargs)
            key = floating[self.target.argument]
            changed_args, changed_kwargs = list(args), dict(kwargs)
            if isinstance(key, int):
                changed_args[key] = _noise_like(args[key], self.seed)
            else:
                changed_kwargs[key] = _noise_like(kwargs[key], self.seed)
            result = func(*changed_args, **changed_kwargs)
            self.changed = not _same(result, func(*args, **kwargs))
            return result

    return Recorder


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


def degenerate_parts(reference: ReferenceRun, policy: EvalPolicy) -> AblationReport:
    """The parts of the reference whose value does not matter at the problem's own parameters."""
    report = AblationReport()
    model = reference.model
    if model is None or not reference.trial_inputs:
        return report
    recorder = _mode_class()
    device = next((p.device.type for p in model.parameters()), "cpu")
    with reference_threads(policy.cpu_threads):
        started = time.perf_counter()
        try:
            census = recorder(None, 0)
            _forward(model, reference.trial_inputs[0], device, census)
        except Exception as exc:  # a forward that refuses to run under a mode: say so
            report.note = Finding("ablation", f"the reference could not be run part by part ({type(exc).__name__})", fatal=False)
            return report
        forward_s = max(time.perf_counter() - started, 1e-6)
        parts = [Part(call, k, f"{_argument(key)} of `{name}` (call {call + 1} of the forward)")
                 for call, (name, floating) in enumerate(census.calls) for k, key in enumerate(floating)]
        report.total = len(parts)
        affordable = min(MOST_PARTS, int(BUDGET_S / forward_s))
        for part in parts[:affordable]:
            if _degenerate(part, reference, policy, device, recorder):
                report.degenerate.append(f"the reference with {part.name} replaced by noise")
            report.checked += 1
    if report.checked < report.total:
        report.note = Finding("ablation", f"{report.checked} of the reference's {report.total} parts were checked "
                              f"for mattering within the budget (a forward takes {forward_s:.2f} s): a part left "
                              "unchecked could be skipped by a kernel unnoticed", fatal=False)
    return report


def _degenerate(part: Part, reference: ReferenceRun, policy: EvalPolicy, device: str, recorder: Any) -> bool:
    """Every trial passes with the part replaced, and the replacement changed what the part's call returned."""
    for index, (seed, inputs, expected) in enumerate(zip(reference.trial_seeds, reference.trial_inputs,
                                                         reference.outputs)):
        # a secret seed: seeded like the trial, the noise was the trial's own input (get_inputs draws with it)
        mode = recorder(part, secrets.randbits(62))
        try:
            output = _forward(reference.model, inputs, device, mode)
        except Exception:  # a replacement that breaks the forward: the part matters
            return False
        if index == 0 and not mode.changed:
            return False  # its value does not reach its own call's output (a shape query): nothing to say
        if not compare_trial(seed, expected, output, policy).passed:
            return False
    return True
