"""What the candidate's trials gave: its saved outputs read back, every call compared with the reference's, and
how close the outputs that passed are to a float64 run (runs in the parent; untrusted, compared here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.decision.facts import Comparison
from harness.policy import EvalPolicy
from harness.verification.compare import compare_trial
from harness.verification.oracle import deterministic, numerical_contract
from harness.verification.reference import ReferenceRun


def load_file(path: Path) -> Any:
    import torch

    return torch.load(path, weights_only=True)


def saved_outputs(path: Path) -> tuple[list[Any] | None, str | None]:
    """(the outputs the child saved, None) or (None, why they are unreadable: the exception's name)."""
    try:
        return load_file(path), None
    except Exception as exc:  # a missing or tampered file: the candidate's problem, never the caller's
        return None, type(exc).__name__


def compared(outputs: Any, reference: ReferenceRun, policy: EvalPolicy) -> dict[str, Any]:
    """The facts of comparing every call of every trial against the reference's output (the worst call of each
    trial is kept): `outputs_count`, and where it matches, `comparisons`."""
    if not isinstance(outputs, list):
        return {"outputs_count": -1}
    if len(outputs) != len(reference.outputs):
        return {"outputs_count": len(outputs)}
    comparisons = []
    for index, (seed, expected, got) in enumerate(zip(reference.trial_seeds, reference.outputs, outputs)):
        results = [compare_trial(seed, expected, call, policy) for call in _calls(got)]
        trial = next((r for r in results if not r.passed), results[0])
        trial.distribution = reference.distributions[index]
        comparisons.append(Comparison(trial, repeated=not trial.passed and results[0].passed and len(results) > 1))
    return {"outputs_count": len(outputs), "comparisons": comparisons}


def closeness(outputs: list[Any], reference: ReferenceRun, policy: EvalPolicy, parent_checked: bool) -> dict[str, Any]:
    """Outputs that passed: how close to a float64 run (`contract`), and whether repeatable (`deterministic`, where
    the parent made the calls)."""
    firsts = [_calls(got)[0] for got in outputs]
    return {"contract": numerical_contract(reference, firsts, policy.cpu_threads, policy.oracle_multiple),
            "deterministic": deterministic(outputs) if parent_checked else None}


def _calls(got: Any) -> list[Any]:
    """One trial's outputs, one per call (a trial called twice holds a list)."""
    return got if isinstance(got, list) and got else [got]
