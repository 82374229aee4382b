"""Write and read evaluation results: problems, candidates and their evaluations."""

from __future__ import annotations

from typing import Any, NamedTuple

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from harness.records import Evaluation, Verdict
from kernelbench.problem import Problem
from store.models import UNVERSIONED, CandidateRow, EvaluationRow, ProblemRow


def upsert_problem(session: Session, problem: Problem, suite: str = "local") -> ProblemRow:
    row = session.scalar(select(ProblemRow).where(ProblemRow.fingerprint == problem.fingerprint))
    if row is None:
        row = ProblemRow(suite=suite, name=problem.name, level=problem.level, problem_id=problem.problem_id,
                         fingerprint=problem.fingerprint, path=problem.path, source=problem.source)
        session.add(row)
        session.flush()
    return row


def add_problem(sessions: sessionmaker[Session], problem: Problem) -> None:
    """Store the problem (once per fingerprint)."""
    with sessions.begin() as session:
        upsert_problem(session, problem)


def problem_of(row: ProblemRow) -> Problem:
    """The problem a row holds (what upsert_problem stored)."""
    return Problem(name=row.name, source=row.source, level=row.level, problem_id=row.problem_id, path=row.path)


def problem_by_fingerprint(sessions: sessionmaker[Session], fingerprint: str) -> Problem | None:
    """The problem with this fingerprint, None when the store does not hold it."""
    with sessions() as session:
        row = session.scalar(select(ProblemRow).where(ProblemRow.fingerprint == fingerprint))
        return problem_of(row) if row is not None else None


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


class ScreenedEvaluation(ValueError):
    """A screening-tier evaluation offered as a result: screening ranks variants, only the full protocol's
    evaluations are stored as results (so no table, report, reward, export or gate ever reads a screened number)."""


def evaluation_row(candidate: CandidateRow, evaluation: Evaluation, rescore_of: int | None = None) -> EvaluationRow:
    if evaluation.screened:
        raise ScreenedEvaluation(f"candidate {evaluation.candidate_hash[:12]}: a {evaluation.tier}-tier evaluation "
                                 "is no result; evaluate it with the full protocol before recording it")
    low, high = evaluation.speedup_ci or (None, None)
    protocol = evaluation.isolation.get("protocol")
    return EvaluationRow(
        checks_version=evaluation.checks_version or UNVERSIONED,
        protocol=protocol if isinstance(protocol, str) else None, rescore_of=rescore_of,
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


def find_candidate_id(sessions: sessionmaker[Session], problem: Problem, source_hash: str, run_id: str | None) -> int | None:
    """The stored candidate with this source for this problem in this run (None: not stored)."""
    same_run = CandidateRow.run_id == run_id if run_id else CandidateRow.run_id.is_(None)
    with sessions() as session:
        return session.scalar(select(CandidateRow.id).join(ProblemRow, CandidateRow.problem_ref == ProblemRow.id)
                              .where(ProblemRow.fingerprint == problem.fingerprint,
                                     CandidateRow.source_hash == source_hash, same_run).limit(1))


def record_candidate(sessions: sessionmaker[Session], problem: Problem, source: str, source_hash: str,
                     run_id: str | None = None, origin: str | None = None, **fields: Any) -> int:
    """A candidate with no result of its own (a tuning variant that was only screened); returns its id."""
    with sessions.begin() as session:
        problem_row = upsert_problem(session, problem)
        return upsert_candidate(session, problem_row, source, source_hash, run_id, origin, **fields).id


def add_evaluation(sessions: sessionmaker[Session], candidate_id: int, evaluation: Evaluation,
                   rescore_of: int | None = None) -> int:
    """Another evaluation of a stored candidate (a re-verification; `rescore_of`: the evaluation it re-judges);
    returns its id."""
    with sessions.begin() as session:
        candidate = session.get(CandidateRow, candidate_id)
        if candidate is None:
            raise KeyError(f"no candidate {candidate_id}")
        row = evaluation_row(candidate, evaluation, rescore_of)
        session.add(row)
        session.flush()
        return row.id


def load_evaluation(sessions: sessionmaker[Session], evaluation_id: int) -> Evaluation:
    with sessions() as session:
        row = session.get(EvaluationRow, evaluation_id)
        if row is None:
            raise KeyError(f"no evaluation {evaluation_id}")
        return Evaluation.model_validate(row.record)


def accepted_candidates(sessions: sessionmaker[Session], run_id: str | None = None) -> list[CandidateRow]:
    """Every candidate with an accepted evaluation (only those of `run_id`, when given), oldest first, each with its
    problem loaded."""
    accepted = select(EvaluationRow.candidate_id).where(EvaluationRow.verdict == Verdict.ACCEPTED.value)
    query = select(CandidateRow).where(CandidateRow.id.in_(accepted)).order_by(CandidateRow.id)
    if run_id:
        query = query.where(CandidateRow.run_id == run_id)
    with sessions() as session:
        rows = list(session.scalars(query))
        for row in rows:
            row.problem  # load the relationship while the session is open
    return rows


class StoredSpeedup(NamedTuple):
    """The best accepted speedup the store holds for a kernel on a device and the lower end of that evaluation's
    interval (None where there is none)."""

    speedup: float | None
    low: float | None


def stored_speedup(sessions: sessionmaker[Session], candidate_id: int, device: str) -> StoredSpeedup:
    """What `runs best` would show for this candidate on this device, with its interval's lower end."""
    accepted = (EvaluationRow.candidate_id == candidate_id, EvaluationRow.verdict == Verdict.ACCEPTED.value,
                EvaluationRow.device == device)
    with sessions() as session:
        best = session.scalar(select(func.max(EvaluationRow.speedup)).where(*accepted))
        if best is None:
            return StoredSpeedup(None, None)
        low = session.scalar(select(EvaluationRow.speedup_low).where(*accepted, EvaluationRow.speedup == best)
                             .limit(1))
        return StoredSpeedup(best, low)
