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

from kernelbench.problem import SHRUNK_MARK, Problem, ProblemError, shrink_note

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
    flops: float  # matmul and convolution FLOPs (torch's FLOP counter)
    elementwise_flops: float = 0.0  # every other op at one FLOP per element it reads or writes (a lower bound)

    @property
    def all_flops(self) -> float:
        return self.flops + self.elementwise_flops

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
    name: str  # `dim`, or `layer_sizes[1]` for an element of a module-level list or tuple
    node: ast.expr
    value: int


_INT_OPERATORS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
                  ast.FloorDiv: lambda a, b: a // b, ast.Pow: lambda a, b: a ** b, ast.LShift: lambda a, b: a << b}


def _int_value(node: ast.expr) -> int | None:
    """The value of an integer literal or of arithmetic on literals (`2048 * 2`); None for anything else."""
    if isinstance(node, ast.Constant):
        return node.value if type(node.value) is int else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _int_value(node.operand)
        return None if inner is None else -inner
    if isinstance(node, ast.BinOp) and type(node.op) in _INT_OPERATORS:
        left, right = _int_value(node.left), _int_value(node.right)
        if left is None or right is None or (isinstance(node.op, ast.Pow) and abs(right) > 64):
            return None
        try:
            return _INT_OPERATORS[type(node.op)](left, right)
        except ZeroDivisionError:
            return None
    return None


def _slots(name: str, value: ast.expr) -> list[tuple[str, ast.expr]]:
    if isinstance(value, (ast.Tuple, ast.List)):
        return [(f"{name}[{i}]", element) for i, element in enumerate(value.elts)]
    return [(name, value)]


def size_constants(source: str) -> list[_Constant]:
    """Module-level integer sizes: `n = 4096`, `m = 128 * 4`, `h, w = 32, 32`, and elements of
    `shape = (8192 * 2,)` or `layer_sizes = [400, 800]` (named `shape[0]`, `layer_sizes[1]`)."""
    found: list[_Constant] = []
    for statement in ast.parse(source).body:
        if not isinstance(statement, ast.Assign) or len(statement.targets) != 1:
            continue
        target, value = statement.targets[0], statement.value
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
            pairs = [(t.id, v) for t, v in zip(target.elts, value.elts) if isinstance(t, ast.Name)]
        elif isinstance(target, ast.Name):
            pairs = [(target.id, value)]
        else:
            continue
        for name, expression in pairs:
            for slot, node in _slots(name, expression):
                number = _int_value(node)
                if number is not None and node.lineno == node.end_lineno:
                    found.append(_Constant(slot, node, number))
    return found


def _scalable(constant: _Constant) -> bool:
    return constant.value >= _MIN_SCALABLE and not _FIXED_NAME.search(constant.name.split("[")[0])


def rewrite_constants(source: str, values: dict[str, int]) -> str:
    """Replace the named constants' expressions by new literals, keeping the rest of the file byte for byte."""
    lines = source.splitlines(keepends=True)
    edits = sorted(((c.node.lineno, c.node.col_offset, c.node.end_col_offset, values[c.name])
                    for c in size_constants(source) if c.name in values and values[c.name] != c.value),
                   reverse=True)
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


def _elementwise_mode() -> Any:
    """A dispatch mode counting the work of every op torch's FLOP counter leaves out (kernelbench/op_work.py: the
    rest of the matrix-product family by its contracted size, pointwise ops, reductions, softmax and norms at one
    FLOP per element of their largest tensor, an op no rule knows per element too: the least any kernel computing
    it must do)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import FlopCounterMode

    from kernelbench.op_work import op_flops

    counted = set(FlopCounterMode().flop_registry)

    class ElementwiseFlops(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.flops = 0.0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            out = func(*args, **(kwargs or {}))
            if func.overloadpacket not in counted:
                self.flops += op_flops(func, args, kwargs or {}, out, unknown="elements")
            return out

    return ElementwiseFlops()


class _ElementwiseFlops:
    def __enter__(self) -> Any:
        self.mode = _elementwise_mode()
        return self.mode.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self.mode.__exit__(*exc)


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
            with FlopCounterMode(display=False) as counter, _ElementwiseFlops() as elementwise, torch.no_grad():
                outputs = model(*inputs)
        params = sum(_tensor_bytes(p) for p in itertools.chain(model.parameters(), model.buffers()))
        return Footprint(_tensor_bytes(inputs) + _tensor_bytes(outputs) + params, float(counter.get_total_flops()),
                         elementwise.flops)
    except Exception as exc:
        raise ProblemError(f"cannot run on the meta device: {type(exc).__name__}: {exc}") from exc
    finally:
        sys.modules.pop(module.__name__, None)


def shrink_problem(problem: Problem, budget: Budget = Budget()) -> ShrinkResult:
    """The problem rescaled to fit `budget` (unchanged if it already fits); ProblemError if it cannot be."""
    before = measure(problem.source)
    values = {c.name: c.value for c in size_constants(problem.source)}
    # a list in source order, never a set: ties between equal sizes are broken by position in the file, so the
    # shrunk sizes (and the fingerprint) do not depend on the process's hash seed
    scalable = [c.name for c in size_constants(problem.source) if _scalable(c)]
    current, source = before, problem.source
    while not current.fits(budget):
        candidates = sorted((n for n in scalable if values[n] > 1), key=lambda n: -values[n])  # stable sort
        if not candidates:
            raise ProblemError(_cannot_shrink(problem, current, budget, values))
        name = candidates[0]
        # sizes that are tied together (`batch_size` and `input_shape[0]` broadcast against each other) must
        # move as one: first the constant alone, then every scalable constant with the same value
        twins = [n for n in scalable if values[n] == values[name]]
        for group in ([name], twins) if len(twins) > 1 else ([name],):
            proposal = dict(values, **{n: max(1, values[n] // 2) for n in group})
            trial_source = rewrite_constants(problem.source, proposal)
            try:
                current = measure(trial_source)
            except ProblemError:
                continue
            values, source = proposal, trial_source
            scalable = [n for n in scalable if not (n in group and values[n] < _MIN_SCALABLE)]
            break
        else:
            scalable.remove(name)  # this constant must keep its value for the problem to stay valid
    original = {c.name: c.value for c in size_constants(problem.source)}
    changes = {n: (original[n], values[n]) for n in values if values[n] != original[n]}
    shrunk = Problem(name=problem.name, source=marked(source, changes), level=problem.level,
                     problem_id=problem.problem_id, path=problem.path) if changes else problem
    return ShrinkResult(shrunk, before, current, changes)


def describe_changes(changes: dict[str, tuple[int, int]]) -> str:
    return ", ".join(f"{name} {old}->{new}" for name, (old, new) in changes.items())


def marked(source: str, changes: dict[str, tuple[int, int]]) -> str:
    """The shrunk source with its marker line first, so the store, reports and prompts all carry it (a marker
    from an earlier shrink is kept in front: the sizes it names are the original ones)."""
    earlier = shrink_note(source)
    body = source.lstrip("\n").split("\n", 1)[1] if earlier else source
    note = describe_changes(changes) if not earlier else f"{earlier}; then {describe_changes(changes)}"
    return f"{SHRUNK_MARK}{note}\n{body}"


def _cannot_shrink(problem: Problem, current: Footprint, budget: Budget, values: dict[str, int]) -> str:
    return (f"{problem.key}: cannot shrink to the CPU budget ({budget.max_bytes / 2**20:.0f} MiB, "
            f"{budget.max_flops:.2g} FLOP): still {current.bytes / 2**20:.1f} MiB and {current.flops:.3g} FLOP "
            f"with no size constant left to reduce (constants: {values or 'none'})")
