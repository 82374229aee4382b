"""Inputs and reference outputs, produced in the parent from the problem alone (never from the candidate)."""

from __future__ import annotations

import itertools
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from harness.records import Check, Finding
from harness.values.distributions import DISTRIBUTIONS, apply_distribution
from harness.values.modules import module_from_file
from harness.values.parameters import redraw_structured, restore
from harness.values.precision import precision_settings
from harness.values.tensors import UNSUPPORTED, cloned, portable, to_device
from kernelbench.problem import Problem, ProblemError

_counter = itertools.count()
_REFERENCE_LOCK = threading.Lock()


@dataclass
class ReferenceRun:
    init_inputs: list[Any]
    trial_seeds: list[int]
    trial_inputs: list[list[Any]]
    outputs: list[Any]  # reference outputs per trial, on the CPU
    distributions: list[str] = field(default_factory=list)
    notes: list[Finding] = field(default_factory=list)
    mutates_inputs: bool = False  # the reference itself writes into its inputs
    model: Any = None  # the reference model on the device, for the references of timed calls
    knockout_inputs: list[Any] | None = None  # an input set no checked call uses, for the knock-out call
    knockout_output: Any = None  # the reference's output on it
    problem: Problem | None = None  # what it was computed from (the ablation shrinks a copy where its forward is slow)
    settings: dict[str, str] = field(default_factory=dict)  # the precision settings it was computed under
    parameters: dict[str, dict[str, Any]] = field(default_factory=dict)  # structured-at-init state redrawn
    # (harness/values/parameters.py): {name: {"init": constant, "value": tensor, ...}}, set in every child too


def load_problem_module(problem: Problem) -> Any:
    with tempfile.TemporaryDirectory(prefix="kw-problem-") as folder:
        path = Path(folder) / "problem.py"
        path.write_text(problem.source)
        try:
            return module_from_file(path, f"kernelwright_problem_{next(_counter)}")
        except Exception as exc:
            raise ProblemError(f"problem {problem.name}: importing it failed: {exc}") from exc


def _finite(output: Any) -> bool:
    import torch

    if isinstance(output, torch.Tensor):
        return not output.is_floating_point() or bool(torch.isfinite(output).all())
    if isinstance(output, list):
        return all(_finite(item) for item in output)
    return True


def _any_finite(output: Any) -> bool:
    import torch

    if isinstance(output, torch.Tensor):
        return not output.is_floating_point() or not output.numel() or bool(torch.isfinite(output).any())
    if isinstance(output, list):
        return all(_any_finite(item) for item in output)
    return True


def _has_nan(output: Any) -> bool:
    import torch

    if isinstance(output, torch.Tensor):
        return output.is_floating_point() and bool(torch.isnan(output).any())
    return isinstance(output, list) and any(_has_nan(item) for item in output)


def _run_once(model: Any, inputs: list[Any], device: str) -> tuple[Any, bool]:
    """Reference output for `inputs` (on the CPU), and whether the reference modified its inputs."""
    import torch

    used = to_device(cloned(inputs), device)
    with torch.no_grad():
        output = portable(model(*used))
    if UNSUPPORTED in repr(output):
        raise ProblemError("Model.forward must return tensors (or lists of them)")
    mutated = any(isinstance(a, torch.Tensor) and not torch.equal(torch.nan_to_num(a), torch.nan_to_num(b.cpu()))
                  for a, b in zip(inputs, used))
    return output, mutated


@contextmanager
def reference_threads(threads: int) -> Iterator[None]:
    """The parent's reference computations one at a time, on `threads` threads (torch's count is per process)."""
    import torch

    with _REFERENCE_LOCK:
        previous = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            yield
        finally:
            torch.set_num_threads(previous)


def run_reference(problem: Problem, device: str, init_seed: int, trial_seeds: list[int],
                  threads: int = 1, vary_distributions: bool = True) -> ReferenceRun:
    """Build `Model` under `init_seed`; with `vary_distributions` (the hardened trials) redraw its parameters and
    buffers structured at init around their init scale (harness/values/parameters.py); per trial draw
    `get_inputs()` under its seed, redraw the values from the trial's distribution (when the reference stays
    finite there), and keep the reference's output.

    One at a time per process: seeding and drawing use torch's global generator (and thread count), so a second
    thread's `manual_seed` between this one's seeding and its draws (a prebuild beside an evaluation) would give
    the parent a reference with other parameters than the child's, and a correct candidate would fail."""
    with reference_threads(threads):
        return _run_reference(problem, device, init_seed, trial_seeds, vary_distributions)


def _run_reference(problem: Problem, device: str, init_seed: int, trial_seeds: list[int],
                   vary_distributions: bool) -> ReferenceRun:
    import torch

    module = load_problem_module(problem)
    try:
        torch.manual_seed(init_seed)
        init_inputs = list(module.get_init_inputs())
        torch.manual_seed(init_seed)
        model = module.Model(*init_inputs).to(device)
        redrawn = redraw_structured(model, init_seed ^ 0x7A3) if vary_distributions else {}
        try:
            run = _trials(problem, module, model, init_inputs, trial_seeds, vary_distributions, device, redrawn)
        except ProblemError:
            if not redrawn:
                raise
            restore(model, redrawn)  # the reference breaks at the redrawn values: at its init, and said so
            run = _trials(problem, module, model, init_inputs, trial_seeds, vary_distributions, device, {})
            run.notes.append(Finding(Check.PARAMETERS, "the reference fails with its structured parameters and "
                                     f"buffers ({', '.join(redrawn)}) redrawn: they stay at their init values",
                                     fatal=False))
    except ProblemError as exc:
        raise ProblemError(f"problem {problem.name}: {exc}") from exc
    except Exception as exc:
        raise ProblemError(f"problem {problem.name}: the reference itself failed: {type(exc).__name__}: {exc}") from exc
    return run


def _trials(problem: Problem, module: Any, model: Any, init_inputs: list[Any], trial_seeds: list[int],
            vary_distributions: bool, device: str, redrawn: dict[str, dict[str, Any]]) -> ReferenceRun:
    import torch

    run = ReferenceRun(init_inputs, trial_seeds, [], [], model=model, problem=problem, parameters=redrawn,
                       settings=precision_settings())
    for index, seed in enumerate(trial_seeds):
        torch.manual_seed(seed)
        inputs = [v.contiguous() if isinstance(v, torch.Tensor) else v for v in module.get_inputs()]
        _add_trial(run, model, inputs, DISTRIBUTIONS[index % len(DISTRIBUTIONS)] if vary_distributions
                   else "default", seed, device)
    _add_knockout(run, device)
    if redrawn:
        run.notes.append(Finding(Check.PARAMETERS, "parameters, buffers and tensor attributes structured at init "
                                 f"({', '.join(redrawn)}) were redrawn around their init scale for every trial and "
                                 "timed call: a kernel must read them, as trained weights would be", fatal=False))
    return run


def _add_knockout(run: ReferenceRun, device: str) -> None:
    """Inputs the candidate sees only in the knock-out call (trial 0's, values redrawn in their domain): a cache
    of earlier answers cannot stand in for the poisoned kernel there, so `[ghost-kernel]` means a ghost kernel."""
    inputs = apply_distribution(run.trial_inputs[0], "uniform", run.trial_seeds[0] ^ 0x6B0, keep_sign=True)
    output, _ = _run_once(run.model, inputs, device)
    if _finite(output):
        run.knockout_inputs, run.knockout_output = inputs, output


def _add_trial(run: ReferenceRun, model: Any, inputs: list[Any], distribution: str, seed: int, device: str) -> None:
    variants = {"uniform": [("signed_uniform", False), ("uniform", True)],
                "large": [("large", False), ("large_x100", True)]}.get(distribution, [(distribution, True)])
    for label, keep_sign in variants if distribution != "default" else []:
        redrawn = apply_distribution(inputs, distribution, seed, keep_sign=keep_sign)
        try:
            output, mutated = _run_once(model, redrawn, device)
        except ProblemError:
            raise
        except Exception:  # outside the reference's domain (it raises there): the next variant
            continue
        if _finite(output) or (_any_finite(output) and not _has_nan(output)
                               and not _finite(_run_once(model, inputs, device)[0])):  # inf where the default has it
            run.trial_inputs.append(redrawn)
            run.outputs.append(output)
            run.distributions.append(label)
            run.mutates_inputs |= mutated
            return
    if distribution != "default":
        run.notes.append(Finding(Check.DISTRIBUTION, f"{distribution} inputs make the reference non-finite; trial used "
                                 "the problem's own distribution", fatal=False))
    output, mutated = _run_once(model, inputs, device)
    if not _finite(output):  # -inf from log(0), say: compared by equality (harness/verification/compare.py)
        if _has_nan(output) or not _any_finite(output):
            raise ProblemError("the reference output contains NaN (or nothing finite) on the problem's own inputs")
        note = Finding(
            Check.NON_FINITE, "the reference gives inf on the problem's own inputs: those positions must hold "
            "the same inf (same sign), the rest are compared within tolerance", fatal=False)
        run.notes += [note] if note not in run.notes else []
    run.trial_inputs.append(inputs)
    run.outputs.append(output)
    run.distributions.append("default")
    run.mutates_inputs |= mutated
