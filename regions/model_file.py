"""The user's model file: KernelBench form (`Model`, `get_init_inputs`, `get_inputs`) and optionally
`get_input_sets()`, the shapes it is served at, each with a weight for how often:

    def get_input_sets():
        return [(0.25, [torch.randn(2, 128, 128)]), (0.75, [torch.randn(8, 32, 128)])]

Weights are relative (normalized to sum 1). Without `get_input_sets`, `get_inputs()` is the one set (weight 1).
Each set becomes a KernelBench problem of its own (the file with `get_inputs` returning that set), so the harness
checks and times the whole model at every served shape exactly as it checks any problem."""

from __future__ import annotations

import ast
import sys
import types
from dataclasses import dataclass
from itertools import count
from pathlib import Path
from typing import Any

from kernelbench.problem import Problem, ProblemError, problem_from_source

INPUT_FUNCTIONS = ("get_inputs", "get_init_inputs", "get_input_sets")
_modules = count()


class ModelFileError(ProblemError):
    """A model file that cannot be used; the message says what to fix."""


@dataclass(frozen=True)
class InputSet:
    index: int
    weight: float  # normalized: the sets' weights sum to 1
    signature: list[tuple[list[int], str]]  # per input: shape, dtype


@dataclass(frozen=True)
class ModelFile:
    path: str
    source: str
    name: str
    sets: list[InputSet]

    def set_problem(self, index: int) -> Problem:
        """The file as a KernelBench problem whose `get_inputs` is input set `index`."""
        if len(self.sets) == 1 and "get_input_sets" not in _defined(self.source):
            return problem_from_source(self.source, self.name, path=self.path)
        chosen = self.sets[index]
        source = (f"{self.source.rstrip()}\n\n\ndef get_inputs():  # kernelwright: input set {index + 1} of "
                  f"{len(self.sets)} (weight {chosen.weight:.3f})\n    return list(get_input_sets()[{index}][1])\n")
        return problem_from_source(source, f"{self.name}_set{index + 1}", path=self.path)


def _defined(source: str) -> set[str]:
    return {n.name for n in ast.parse(source).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}


def load_module(source: str, origin: str) -> types.ModuleType:
    """Run a trusted file (the user's model, a region problem we wrote) as a fresh module."""
    module = types.ModuleType(f"kernelwright_regions_{next(_modules)}")
    module.__file__ = origin
    sys.modules[module.__name__] = module  # dataclasses and pickling look their module up
    try:
        exec(compile(source, origin, "exec"), module.__dict__)
    except Exception as exc:  # noqa: BLE001 - the user's file failed: say where, not a traceback
        sys.modules.pop(module.__name__, None)
        raise ModelFileError(f"{origin}: running it failed ({type(exc).__name__}: {exc})") from None
    return module


def raw_sets(module: types.ModuleType, origin: str) -> list[tuple[float, list[Any]]]:
    """The (weight, inputs) pairs the file serves at, weights as given."""
    if hasattr(module, "get_input_sets"):
        try:
            pairs = [(float(w), list(xs)) for w, xs in module.get_input_sets()]
        except (TypeError, ValueError) as exc:
            raise ModelFileError(f"{origin}: get_input_sets() must return [(weight, [inputs...]), ...] ({exc})") \
                from None
    else:
        pairs = [(1.0, list(module.get_inputs()))]
    if not pairs or any(w <= 0 for w, _ in pairs):
        raise ModelFileError(f"{origin}: get_input_sets() needs at least one set, each with a positive weight")
    return pairs


def load_model_file(path: str | Path) -> ModelFile:
    file = Path(path)
    if not file.is_file():
        raise ModelFileError(f"{file}: no such model file")
    source = file.read_text()
    try:
        defined = _defined(source)
    except SyntaxError as exc:
        raise ModelFileError(f"{file}: not valid Python (line {exc.lineno}: {exc.msg})") from None
    missing = [n for n in ("Model", "get_init_inputs") if n not in defined]
    if missing or not ({"get_inputs", "get_input_sets"} & defined):
        raise ModelFileError(f"{file}: a model file defines `class Model`, `get_init_inputs()` and `get_inputs()` "
                             f"or `get_input_sets()` (missing: {', '.join(missing) or 'the inputs'})")
    import torch

    module = load_module(source, str(file))
    try:
        pairs = raw_sets(module, str(file))
    finally:
        sys.modules.pop(module.__name__, None)
    total = sum(w for w, _ in pairs)
    sets = []
    for index, (weight, inputs) in enumerate(pairs):
        if not all(isinstance(x, torch.Tensor) for x in inputs):
            raise ModelFileError(f"{file}: input set {index + 1} holds non-tensor inputs; give tensors only")
        signature = [(list(x.shape), str(x.dtype).removeprefix("torch.")) for x in inputs]
        sets.append(InputSet(index, weight / total, signature))
    return ModelFile(str(file), source, file.stem, sets)
