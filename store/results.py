"""Write and read evaluation results."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from harness.records import Evaluation
from kernelbench.problem import Problem
from store.models import CandidateRow, EvaluationRow, ProblemRow


def upsert_problem(session: Session, problem: Problem, suite: str = "local") -> ProblemRow:
    row = session.scalar(select(ProblemRow).where(ProblemRow.fingerprint == problem.fingerprint))
    if row is None:
        row = ProblemRow(suite=suite, name=problem.name, level=problem.level, problem_id=problem.problem_id,
                         fingerprint=problem.fingerprint, path=problem.path, source=problem.source)
        session.add(row)
        session.flush()
    return row


def upsert_candidate(session: Session, problem_row: ProblemRow, source: str, source_hash: str,
                     run_id: str | None = None, origin: str | None = None, **fields: Any) -> CandidateRow:
    """The same source for the same problem (in the same run, or outside any run) is one candidate with many
    evaluations."""
    same_run = CandidateRow.run_id == run_id if run_id else CandidateRow.run_id.is_(None)
    query = select(CandidateRow).where(CandidateRow.problem_ref == problem_row.id,
                                       CandidateRow.source_hash == source_hash, same_run)
    row = session.scalar(query)
    if row is None:
        row = CandidateRow(problem_ref=problem_row.id, run_id=run_id, source=source, source_hash=source_hash,
                           origin=origin, **fields)
        session.add(row)
        session.flush()
    return row


def evaluation_row(candidate: CandidateRow, evaluation: Evaluation) -> EvaluationRow:
    low, high = evaluation.speedup_ci or (None, None)
    return EvaluationRow(
        candidate_id=candidate.id, device=evaluation.device, device_info=evaluation.device_info,
        verdict=evaluation.verdict.value, reasons=evaluation.reasons, speedup=evaluation.speedup,
        speedup_low=low, speedup_high=high, ref_ms=evaluation.ref_ms, candidate_ms=evaluation.candidate_ms,
        ref_samples_ms=evaluation.ref_timing.samples_ms if evaluation.ref_timing else [],
        candidate_samples_ms=evaluation.candidate_timing.samples_ms if evaluation.candidate_timing else [],
        record=evaluation.model_dump(mode="json"))


def record_evaluation(sessions: sessionmaker[Session], problem: Problem, source: str, evaluation: Evaluation,
                      run_id: str | None = None, origin: str | None = None, **candidate_fields: Any) -> int:
    """Store problem, candidate and evaluation in one transaction; returns the evaluation's id."""
    with sessions.begin() as session:
        problem_row = upsert_problem(session, problem)
        candidate = upsert_candidate(session, problem_row, source, evaluation.candidate_hash, run_id, origin,
                                     **candidate_fields)
        row = evaluation_row(candidate, evaluation)
        session.add(row)
        session.flush()
        return row.id


def add_evaluation(sessions: sessionmaker[Session], candidate_id: int, evaluation: Evaluation) -> int:
    """Another evaluation of a stored candidate (a re-verification); returns its id."""
    with sessions.begin() as session:
        candidate = session.get(CandidateRow, candidate_id)
        if candidate is None:
            raise KeyError(f"no candidate {candidate_id}")
        row = evaluation_row(candidate, evaluation)
        session.add(row)
        session.flush()
        return row.id


def load_evaluation(sessions: sessionmaker[Session], evaluation_id: int) -> Evaluation:
    with sessions() as session:
        row = session.get(EvaluationRow, evaluation_id)
        if row is None:
            raise KeyError(f"no evaluation {evaluation_id}")
        return Evaluation.model_validate(row.record)
