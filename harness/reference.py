"""Inputs and reference outputs, produced in the parent from the problem alone (never from the candidate)."""

from __future__ import annotations

import itertools
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.modules import module_from_file
from kernelbench.problem import Problem, ProblemError

_counter = itertools.count()


@dataclass
class ReferenceRun:
    init_inputs: list[Any]
    trial_seeds: list[int]
    trial_inputs: list[list[Any]]
    outputs: list[Any]  # reference outputs per trial, on the CPU


def load_problem_module(problem: Problem) -> Any:
    with tempfile.TemporaryDirectory(prefix="kw-problem-") as folder:
        path = Path(folder) / "problem.py"
        path.write_text(problem.source)
        try:
            return module_from_file(path, f"kernelwright_problem_{next(_counter)}")
        except Exception as exc:
            raise ProblemError(f"problem {problem.name}: importing it failed: {exc}") from exc


def _to_cpu(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu")
    if isinstance(value, (tuple, list)):
        return [_to_cpu(v) for v in value]
    return value


def _to_device(values: list[Any], device: str) -> list[Any]:
    import torch

    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def run_reference(problem: Problem, device: str, init_seed: int, trial_seeds: list[int],
                  threads: int = 1) -> ReferenceRun:
    """Build `Model` under `init_seed` and run it on `get_inputs()` drawn under each trial seed."""
    import torch

    module = load_problem_module(problem)
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        torch.manual_seed(init_seed)
        init_inputs = list(module.get_init_inputs())
        torch.manual_seed(init_seed)
        model = module.Model(*init_inputs).to(device)
        trial_inputs, outputs = [], []
        for seed in trial_seeds:
            torch.manual_seed(seed)
            inputs = [v.contiguous() if isinstance(v, torch.Tensor) else v for v in module.get_inputs()]
            with torch.no_grad():
                outputs.append(_to_cpu(model(*_to_device([_clone(v) for v in inputs], device))))
            trial_inputs.append(inputs)
    except ProblemError:
        raise
    except Exception as exc:
        raise ProblemError(f"problem {problem.name}: the reference itself failed: {type(exc).__name__}: {exc}") from exc
    finally:
        torch.set_num_threads(previous_threads)
    return ReferenceRun(init_inputs, trial_seeds, trial_inputs, outputs)


def _clone(value: Any) -> Any:
    import torch

    return value.clone() if isinstance(value, torch.Tensor) else value
