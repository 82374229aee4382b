"""Size reduction: rescale a problem's module-level size constants until it fits a CPU budget.

Real KernelBench level-1 inputs reach 16 GiB. A problem is measured on PyTorch's `meta` device (shapes and
FLOPs, no memory), and its largest size constant is halved until inputs + outputs + parameters fit the memory
budget and the forward fits the FLOP budget. Every step is validated by running the model on `meta`: a
change that breaks the problem (inconsistent shapes, divisibility) is undone and that constant is frozen.
"""

from __future__ import annotations

import ast
import itertools
import re
import sys
import types
from dataclasses import dataclass, field
from typing import Any

from kernelbench.problem import Problem, ProblemError

_FIXED_NAME = re.compile(r"kernel|stride|pad|dilation|group|axis|eps|^k$|head", re.IGNORECASE)
_MIN_SCALABLE = 8
_counter = itertools.count()


@dataclass(frozen=True)
class Budget:
    """What a CPU-sized problem may cost: bytes of inputs, outputs and parameters; FLOPs of one forward."""

    max_bytes: int = 64 * 2**20
    max_flops: float = 2e9


@dataclass
class Footprint:
    bytes: int
    flops: float

    def fits(self, budget: Budget) -> bool:
        return self.bytes <= budget.max_bytes and self.flops <= budget.max_flops


@dataclass
class ShrinkResult:
    problem: Problem
    before: Footprint
    after: Footprint
    changes: dict[str, tuple[int, int]] = field(default_factory=dict)


@dataclass
class _Constant:
    name: str
    node: ast.Constant
    value: int


def size_constants(source: str) -> list[_Constant]:
    """Module-level `NAME = <int>` (and `a, b = 1, 2`) assignments."""
    found: list[_Constant] = []
    for statement in ast.parse(source).body:
        if not isinstance(statement, ast.Assign) or len(statement.targets) != 1:
            continue
        target, value = statement.targets[0], statement.value
        pairs = [(target, value)]
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
            pairs = list(zip(target.elts, value.elts))
        for name, literal in pairs:
            if (isinstance(name, ast.Name) and isinstance(literal, ast.Constant)
                    and type(literal.value) is int):
                found.append(_Constant(name.id, literal, literal.value))
    return found


def _scalable(constant: _Constant) -> bool:
    return constant.value >= _MIN_SCALABLE and not _FIXED_NAME.search(constant.name)


def rewrite_constants(source: str, values: dict[str, int]) -> str:
    """Replace the literals of the named constants, keeping the rest of the file byte for byte."""
    lines = source.splitlines(keepends=True)
    edits = sorted(((c.node.lineno, c.node.col_offset, c.node.end_col_offset, values[c.name])
                    for c in size_constants(source) if c.name in values), reverse=True)
    for lineno, start, end, value in edits:
        line = lines[lineno - 1]
        lines[lineno - 1] = line[:start] + str(value) + line[end:]
    return "".join(lines)


def _tensor_bytes(value: Any) -> int:
    import torch

    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (list, tuple)):
        return sum(_tensor_bytes(v) for v in value)
    return 0


def measure(source: str) -> Footprint:
    """Bytes and FLOPs of one forward, computed on the meta device; raises ProblemError if it cannot run."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    module = types.ModuleType(f"kernelwright_shrink_{next(_counter)}")
    try:
        sys.modules[module.__name__] = module
        exec(compile(source, module.__name__, "exec"), module.__dict__)
        with torch.device("meta"):
            model = module.Model(*module.get_init_inputs())
            inputs = module.get_inputs()
            with FlopCounterMode(display=False) as counter, torch.no_grad():
                outputs = model(*inputs)
        params = sum(_tensor_bytes(p) for p in itertools.chain(model.parameters(), model.buffers()))
        return Footprint(_tensor_bytes(inputs) + _tensor_bytes(outputs) + params, float(counter.get_total_flops()))
    except Exception as exc:
        raise ProblemError(f"cannot run on the meta device: {type(exc).__name__}: {exc}") from exc
    finally:
        sys.modules.pop(module.__name__, None)


def shrink_problem(problem: Problem, budget: Budget = Budget()) -> ShrinkResult:
    """The problem rescaled to fit `budget` (unchanged if it already fits); ProblemError if it cannot be."""
    before = measure(problem.source)
    values = {c.name: c.value for c in size_constants(problem.source)}
    scalable = {c.name for c in size_constants(problem.source) if _scalable(c)}
    current, source = before, problem.source
    while not current.fits(budget):
        candidates = sorted((n for n in scalable if values[n] > 1), key=lambda n: -values[n])
        if not candidates:
            raise ProblemError(_cannot_shrink(problem, current, budget, values))
        name = candidates[0]
        proposal = dict(values, **{name: max(1, values[name] // 2)})
        trial_source = rewrite_constants(problem.source, proposal)
        try:
            footprint = measure(trial_source)
        except ProblemError:
            scalable.discard(name)  # this constant must keep its value for the problem to stay valid
            continue
        values, source, current = proposal, trial_source, footprint
        if values[name] < _MIN_SCALABLE:
            scalable.discard(name)
    original = {c.name: c.value for c in size_constants(problem.source)}
    changes = {n: (original[n], values[n]) for n in values if values[n] != original[n]}
    shrunk = Problem(name=problem.name, source=source, level=problem.level, problem_id=problem.problem_id,
                     path=problem.path) if changes else problem
    return ShrinkResult(shrunk, before, current, changes)


def _cannot_shrink(problem: Problem, current: Footprint, budget: Budget, values: dict[str, int]) -> str:
    return (f"{problem.key}: cannot shrink to the CPU budget ({budget.max_bytes / 2**20:.0f} MiB, "
            f"{budget.max_flops:.2g} FLOP): still {current.bytes / 2**20:.1f} MiB and {current.flops:.3g} FLOP "
            f"with no size constant left to reduce (constants: {values or 'none'})")
