"""Inputs and reference outputs, produced in the parent from the problem alone (never from the candidate)."""

from __future__ import annotations

import itertools
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.modules import module_from_file
from harness.tensors import UNSUPPORTED, cloned, portable, to_device
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
                outputs.append(portable(model(*to_device(cloned(inputs), device))))
            if UNSUPPORTED in repr(outputs[-1]):
                raise ProblemError(f"problem {problem.name}: Model.forward must return tensors (or lists of them)")
            trial_inputs.append(inputs)
    except ProblemError:
        raise
    except Exception as exc:
        raise ProblemError(f"problem {problem.name}: the reference itself failed: {type(exc).__name__}: {exc}") from exc
    finally:
        torch.set_num_threads(previous_threads)
    return ReferenceRun(init_inputs, trial_seeds, trial_inputs, outputs)
