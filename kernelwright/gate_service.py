"""`kernelwright gate`: re-verify accepted kernels (from the store or a folder) in fresh processes with new
secret seeds and every check. Anything that no longer holds fails the gate, by name and with the reason."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from sqlalchemy import select

from harness import EvalPolicy, Evaluation
from harness.device import resolve_device
from harness.pipeline import candidate_hash
from harness.execution.eval_task import EvalTask
from harness.execution.executor import open_executor
from kernelbench.bundled import PROBLEMS_ROOT
from kernelbench.matching import match_solution
from kernelbench.shrink import shrink_problem
from kernelbench.problem import Problem, fingerprint_source, load_problems
from kernelwright.eval_service import UsageError
from store import CandidateRow, EvaluationRow, open_store, record_evaluation

Progress = Callable[[str], None]


@dataclass
class GateResult:
    problem: str
    kernel: str  # candidate id in the store, or the solution's path
    verdict: str
    speedup: float | None = None
    reasons: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.verdict == "accepted"


def _stored_candidates(db_url: str | None, run_id: str | None, problem_filter: str | None) -> list[CandidateRow]:
    sessions = open_store(db_url, create=False)
    with sessions() as session:
        accepted = select(EvaluationRow.candidate_id).where(EvaluationRow.verdict == "accepted")
        query = select(CandidateRow).where(CandidateRow.id.in_(accepted)).order_by(CandidateRow.id)
        if run_id:
            query = query.where(CandidateRow.run_id == run_id)
        rows = list(session.scalars(query))
        for row in rows:
            row.problem  # load the relationship while the session is open
    if problem_filter:
        rows = [r for r in rows if problem_filter.lower() in _problem_of(r).key.lower()]
    return rows


def _problem_of(row: CandidateRow) -> Problem:
    p = row.problem
    return Problem(name=p.name, source=p.source, level=p.level, problem_id=p.problem_id, path=p.path)


def _tampering(row: CandidateRow) -> list[str]:
    found = []
    if candidate_hash(row.source) != row.source_hash:
        found.append("[tampered] the stored kernel's source no longer matches the hash it was accepted with")
    if fingerprint_source(row.problem.source) != row.problem.fingerprint:
        found.append("[tampered] the stored problem's source no longer matches its fingerprint")
    return found


NOISE_BAND = 1.25  # a stored speedup this far above the re-measured interval's top cannot be reproduced


def _stored_speedup(sessions: object, candidate_id: int, device: str) -> float | None:
    """The best speedup the store holds for this candidate on this device (what `runs best` would show)."""
    from sqlalchemy import func

    with sessions() as session:  # type: ignore[operator]
        query = select(func.max(EvaluationRow.speedup)).where(
            EvaluationRow.candidate_id == candidate_id, EvaluationRow.verdict == "accepted",
            EvaluationRow.device == device)
        return session.scalar(query)


def speedup_not_reproduced(stored: float | None, evaluation: object) -> str | None:
    """A reason when the stored speedup is outside what a fresh measurement supports, else None."""
    interval = getattr(evaluation, "speedup_ci", None)
    if stored is None or not interval or getattr(evaluation, "verdict", None) != "accepted":
        return None
    if stored > interval[1] * NOISE_BAND:
        return (f"[speedup] the store says {stored:.2f}x; re-measured {evaluation.speedup:.2f}x (95% interval "  # type: ignore[attr-defined]
                f"{interval[0]:.2f}-{interval[1]:.2f}x): the stored speedup cannot be reproduced")
    return None


def _evaluate_all(work: list[tuple[Problem, str]], device: str, policy: EvalPolicy, workers: int | None,
                  progress: Progress | None) -> list[Evaluation]:
    """Every kernel through one executor: builds in parallel, timed one at a time; results in `work`'s order."""
    executor = open_executor("local", device, workers)
    try:
        futures = [executor.submit(EvalTask(problem.key, problem, source, device, policy)) for problem, source in work]
        evaluations = []
        for index, ((problem, _), future) in enumerate(zip(work, futures)):
            evaluations.append(future.result())
            if progress:
                progress(f"[{index + 1}/{len(work)}] {problem.key}: {evaluations[-1].verdict.value}")
        return evaluations
    finally:
        executor.shutdown()


def gate_store(db_url: str | None, device: str, policy: EvalPolicy, run_id: str | None = None,
               problem_filter: str | None = None, progress: Progress | None = None,
               workers: int | None = None) -> list[GateResult]:
    rows = _stored_candidates(db_url, run_id, problem_filter)
    if not rows:
        raise UsageError("no accepted kernels in the store match: nothing to verify (check --db, --run, --problem)")
    device = resolve_device(device)
    sessions = open_store(db_url, create=False)
    results: dict[int, GateResult] = {}
    intact = []
    for row in rows:
        tampered = _tampering(row)
        if tampered:
            results[row.id] = GateResult(_problem_of(row).key, f"candidate {row.id}", "tampered", reasons=tampered)
        else:
            intact.append(row)
    stored = {row.id: _stored_speedup(sessions, row.id, device) for row in intact}
    evaluations = _evaluate_all([(_problem_of(row), row.source) for row in intact], device, policy, workers, progress)
    for row, evaluation in zip(intact, evaluations):
        problem = _problem_of(row)
        record_evaluation(sessions, problem, row.source, evaluation, origin=f"gate of candidate {row.id}")
        unreproduced = speedup_not_reproduced(stored[row.id], evaluation)
        verdict = "unreproduced" if unreproduced else evaluation.verdict.value
        results[row.id] = GateResult(problem.key, f"candidate {row.id}", verdict, evaluation.speedup,
                                     ([unreproduced] if unreproduced else []) + evaluation.reasons)
    return [results[row.id] for row in rows]


def gate_folder(solutions: Path, problems_path: Path | None, device: str, policy: EvalPolicy,
                progress: Progress | None = None, shrink: bool = False, workers: int | None = None) -> list[GateResult]:
    """Each solution against its problem (matched by file name); `shrink` rescales problems to the CPU budget."""
    if not solutions.is_dir():
        raise UsageError(f"{solutions}: not a folder of solutions")
    problems = load_problems(problems_path or PROBLEMS_ROOT)
    files = sorted(solutions.rglob("*.py"))
    if not files:
        raise UsageError(f"{solutions}: no .py solutions found")
    device = resolve_device(device)
    matched: dict[Path, Problem] = {}
    for file in files:
        problem = match_solution(problems, file, solutions)
        if problem is not None:
            matched[file] = shrink_problem(problem).problem if shrink else problem
    evaluations = dict(zip(matched, _evaluate_all([(p, f.read_text()) for f, p in matched.items()], device, policy,
                                                  workers, progress)))
    results = []
    for file in files:
        if file not in matched:
            results.append(GateResult("?", str(file), "unmatched",
                                      reasons=["no problem matches this file (name it levelN/<id>_<Name>.py)"]))
            continue
        evaluation = evaluations[file]
        results.append(GateResult(matched[file].key, str(file), evaluation.verdict.value, evaluation.speedup,
                                  evaluation.reasons))
    return results
