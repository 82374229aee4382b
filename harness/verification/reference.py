"""Inputs and reference outputs, produced in the parent from the problem alone (never from the candidate)."""

from __future__ import annotations

import itertools
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from harness.defences import is_off
from harness.records import Check, Finding
from harness.values.distributions import DISTRIBUTIONS, LARGE, WIDE, apply_distribution, one_signed
from harness.values.modules import module_from_file
from harness.values.parameters import needs_twin, redraw, seeded
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
    parameters: dict[str, dict[str, Any]] = field(default_factory=dict)  # the state redrawn
    # (harness/values/parameters.py): {name: {"init": constant, "value": tensor, ...} or a recipe}, set in every
    # child too


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
    """Build `Model` under `init_seed`; with `vary_distributions` (the hardened trials) redraw its parameters,
    random buffers and attributes i.i.d. at their own scale and its state structured at init around its init
    scale (harness/values/parameters.py); per trial draw `get_inputs()` under its seed, redraw the values from the
    trial's distribution (when the reference stays finite there), and keep the reference's output.

    One at a time per process: seeding and drawing use torch's global generator (and thread count), so a second
    thread's `manual_seed` between this one's seeding and its draws (a prebuild beside an evaluation) would give
    the parent a reference with other parameters than the child's, and a correct candidate would fail."""
    with reference_threads(threads):
        return _run_reference(problem, device, init_seed, trial_seeds, vary_distributions)


_TWIN_SEED = 0x5EED  # the twin built to tell random buffers from the operator's definition
_FALLBACKS = {True: "with every parameter redrawn: only its state structured at init is redrawn",
              False: "with its state structured at init redrawn: it stays at its init values"}


def _built(module: Any, init_inputs: list[Any], seed: int, device: str) -> Any:
    import torch

    torch.manual_seed(seed)
    return module.Model(*init_inputs).to(device)


def _run_reference(problem: Problem, device: str, init_seed: int, trial_seeds: list[int],
                   vary_distributions: bool) -> ReferenceRun:
    import torch

    module = load_problem_module(problem)
    try:
        torch.manual_seed(init_seed)
        init_inputs = list(module.get_init_inputs())
        model = _built(module, init_inputs, init_seed, device)
        redrawing = vary_distributions and not is_off("parameter_redraw")
        random_state = seeded(model, _built(module, init_inputs, init_seed ^ _TWIN_SEED, device)) \
            if redrawing and needs_twin(model) else set()
        fallbacks = []
        for everything in (True, False) if redrawing else ():
            redrawn = redraw(model, init_seed ^ 0x7A3, everything, random_state)
            if not redrawn:
                break
            try:  # the reference must stay finite with them: where it does not, a lesser redraw
                run = _trials(problem, module, model, init_inputs, trial_seeds, vary_distributions, device, redrawn)
                run.notes += fallbacks
                return run
            except Exception as exc:
                lesser = everything and any("draw" in drawn for drawn in redrawn.values())
                fallbacks.append(Finding(Check.PARAMETERS, f"the reference fails {_FALLBACKS[lesser]} "
                                         f"({_short(exc)})", fatal=False))
                model = _built(module, init_inputs, init_seed, device)
                if not lesser:  # nothing but the structured state was redrawn: the init is what is left
                    break
        run = _trials(problem, module, model, init_inputs, trial_seeds, vary_distributions, device, {})
        run.notes += fallbacks
        return run
    except ProblemError as exc:
        raise ProblemError(f"problem {problem.name}: {exc}") from exc
    except Exception as exc:
        raise ProblemError(f"problem {problem.name}: the reference itself failed: {type(exc).__name__}: {exc}") from exc


def _short(exc: Exception) -> str:
    text = str(exc) if isinstance(exc, ProblemError) else f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 160 else text[:157] + "..."


def _named(names: list[str], most: int = 6) -> str:
    """Names for a note, the first `most` of them and a count of the rest (a deep model has hundreds)."""
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


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
        structured = [name for name, drawn in redrawn.items() if "draw" not in drawn]
        random = [name for name, drawn in redrawn.items() if "draw" in drawn]
        said = ([f"parameters, buffers and tensor attributes structured at init ({_named(structured)}) around "
                 "their init scale"] if structured else []) + \
            ([f"the other parameters and random buffers ({_named(random)}) i.i.d. at their own mean and std"]
             if random else [])
        run.notes.append(Finding(Check.PARAMETERS, f"redrawn for every trial and timed call: {'; '.join(said)}: a "
                                 "kernel must read them, as it would trained weights", fatal=False))
    return run


def _add_knockout(run: ReferenceRun, device: str) -> None:
    """Inputs the candidate sees only in the knock-out call (trial 0's, values redrawn in their domain): a cache
    of earlier answers cannot stand in for the poisoned kernel there, so `[ghost-kernel]` means a ghost kernel."""
    inputs = apply_distribution(run.trial_inputs[0], "uniform", run.trial_seeds[0] ^ 0x6B0, keep_sign=True)
    output, _ = _run_once(run.model, inputs, device)
    if _finite(output):
        run.knockout_inputs, run.knockout_output = inputs, output


def _variants(distribution: str, inputs: list[Any]) -> list[tuple[str, bool, float | None]]:
    """A trial's distribution as (label, keep_sign, reach), widest first: the first where the reference stays
    finite is drawn (harness/values/distributions.py). `uniform`: `WIDE` times the sample's magnitude, symmetric,
    then with its sign, then the sample's own range, symmetric, then as it is; `large`: each magnitude with both
    signs, then (a sample of one sign) with its sign."""
    if distribution == "default":
        return []
    wide = not is_off("wide_inputs")  # test-only: the sample's own range (and `large` at 1000 only), as before
    if distribution == "uniform":
        return [("signed_uniform", False, WIDE), ("uniform", True, WIDE)] * wide + \
            [("signed_uniform_own", False, 1.0), ("uniform_own", True, 1.0)]
    if distribution == "large" and not wide:
        return [("large", True, LARGE[0])]
    if distribution == "large":
        signs = (False, True) if one_signed(inputs) else (False,)
        return [("large" if reach == LARGE[0] else f"large_{reach:g}", keep_sign, reach)
                for reach in LARGE for keep_sign in signs]
    return [(distribution, True, None)]


def _add_trial(run: ReferenceRun, model: Any, inputs: list[Any], distribution: str, seed: int, device: str) -> None:
    for label, keep_sign, reach in _variants(distribution, inputs):
        redrawn = apply_distribution(inputs, distribution, seed, keep_sign=keep_sign, reach=reach)
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
