"""`kernelwright eval`: resolve the inputs, evaluate, record. Called by the CLI, testable without it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness import EvalPolicy, Evaluation, evaluate
from harness.device import device_notice, resolve_device
from harness.pipeline import Progress
from harness.execution.profile import profile_accepted
from kernelbench.bundled import resolve_problem
from kernelbench.problem import Problem, ProblemError
from kernelbench.shrink import ShrinkResult, shrink_problem
from store import open_store, record_evaluation


class UsageError(ValueError):
    """A mistake in what the user asked for; the message says what to do."""


@dataclass
class EvalOutcome:
    problem: Problem
    evaluation: Evaluation
    evaluation_id: int | None
    shrink: ShrinkResult | None = None


def read_candidate(path: Path) -> str:
    if not path.exists():
        raise UsageError(f"{path}: no such candidate file")
    if path.is_dir():
        raise UsageError(f"{path} is a folder; give one candidate .py file")
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read it ({exc})") from exc


def run_eval(problem_spec: str, candidate_path: Path, device: str, policy: EvalPolicy, db_url: str | None,
             shrink: bool = False, store: bool = True, progress: Progress | None = None,
             profile: bool = False) -> EvalOutcome:
    source = read_candidate(candidate_path)
    problem = resolve_problem(problem_spec)
    shrunk = None
    if shrink:
        shrunk = shrink_problem(problem)
        problem = shrunk.problem
    sessions = open_store(db_url) if store else None  # fail on a bad --db before minutes of building
    resolved = resolve_device(device)
    evaluation = evaluate(problem, source, resolved, policy, progress=progress)
    if profile:
        if progress and evaluation.accepted and resolved == "cuda":
            progress("profiling the accepted kernel with Nsight Compute")
        profile_accepted(problem, source, evaluation, policy)
    notice = device_notice(device, resolved)
    if notice:
        evaluation.reasons.insert(0, notice)
    evaluation_id = None
    if sessions is not None:
        evaluation_id = record_evaluation(sessions, problem, source, evaluation, origin=str(candidate_path))
    return EvalOutcome(problem, evaluation, evaluation_id, shrunk)


__all__ = ["EvalOutcome", "ProblemError", "UsageError", "read_candidate", "run_eval"]
