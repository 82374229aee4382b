"""The queries a sweep makes: its per-problem items, the problems it resumes with, the baselines it measures and
the timings and shrink notes its summary reads."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from harness.records import Verdict
from kernelbench.problem import Problem, shrink_note
from store.models import BaselineRow, CandidateRow, EvaluationRow, ProblemRow, SweepItemRow
from store.results import problem_of, upsert_problem

Sessions = sessionmaker[Session]


def sweep_items(sessions: Sessions, run_id: str) -> dict[str, SweepItemRow]:
    """The sweep's rows, one per problem, by problem key."""
    with sessions() as session:
        return {row.problem_key: row for row in session.scalars(select(SweepItemRow).where(SweepItemRow.run_id == run_id))}


def mark_item(sessions: Sessions, run_id: str, problem: Problem, **fields: Any) -> None:
    """Set `fields` on the problem's row of the sweep (made on first use)."""
    with sessions.begin() as session:
        row = session.scalar(select(SweepItemRow).where(SweepItemRow.run_id == run_id,
                                                        SweepItemRow.problem_key == problem.key))
        if row is None:
            row = SweepItemRow(run_id=run_id, problem_ref=upsert_problem(session, problem).id, problem_key=problem.key,
                               level=problem.level)
            session.add(row)
        for name, value in fields.items():
            setattr(row, name, value)


def add_problems(sessions: Sessions, problems: list[Problem]) -> None:
    """Store the sweep's problems (once per fingerprint), in one transaction."""
    with sessions.begin() as session:
        for problem in problems:
            upsert_problem(session, problem)


def stored_problems(sessions: Sessions, fingerprints: list[str]) -> list[Problem]:
    """The problems with these fingerprints, in their order (those missing from the store are left out)."""
    with sessions() as session:
        rows = {r.fingerprint: r for r in session.scalars(select(ProblemRow).where(ProblemRow.fingerprint.in_(fingerprints)))}
    return [problem_of(rows[f]) for f in fingerprints if f in rows]


BASELINE_METHOD = "parent-clocked"  # timed by the candidates' protocol (harness/execution/baseline.py)


def baseline(sessions: Sessions, fingerprint: str, device_key: str) -> BaselineRow | None:
    """The problem's baselines on the device, where they were timed the way candidates are (older rows: None)."""
    with sessions() as session:
        return session.scalar(select(BaselineRow).where(BaselineRow.problem_fingerprint == fingerprint,
                                                        BaselineRow.device_key == device_key,
                                                        BaselineRow.method == BASELINE_METHOD))


def add_baseline(sessions: Sessions, fingerprint: str, device_key: str, measured: dict[str, Any]) -> None:
    """Eager and torch.compile times of a problem on a device (`measured`'s `*error*` entries kept as errors),
    replacing a row an earlier release timed another way."""
    ci = measured.get("compile_speedup_ci")
    with sessions.begin() as session:
        session.execute(delete(BaselineRow).where(BaselineRow.problem_fingerprint == fingerprint,
                                                  BaselineRow.device_key == device_key))
        session.add(BaselineRow(problem_fingerprint=fingerprint, device_key=device_key,
                                eager_ms=measured.get("eager_ms"), compile_ms=measured.get("compile_ms"),
                                errors={k: v for k, v in measured.items() if "error" in k}, method=BASELINE_METHOD,
                                compile_speedup=measured.get("compile_speedup"),
                                compile_speedup_ci=list(ci) if ci else None, timing=measured.get("timing")))


def baselines(sessions: Sessions, fingerprints: dict[str, str], device_key: str) -> dict[str, BaselineRow]:
    """`fingerprints`: problem key -> fingerprint; the baselines known on `device_key`, by problem key."""
    with sessions() as session:
        rows = session.scalars(select(BaselineRow).where(BaselineRow.device_key == device_key,
                                                         BaselineRow.method == BASELINE_METHOD,
                                                         BaselineRow.problem_fingerprint.in_(list(fingerprints.values()))))
        by_fingerprint = {row.problem_fingerprint: row for row in rows}
    return {k: by_fingerprint[f] for k, f in fingerprints.items() if f in by_fingerprint}


def timings(sessions: Sessions, evaluation_ids: list[int]) -> dict[int, dict[str, Any]]:
    """The reference's time and the speedup's 95% interval of each evaluation, by id."""
    with sessions() as session:
        rows = session.execute(select(EvaluationRow.id, EvaluationRow.ref_ms, EvaluationRow.speedup_low,
                                      EvaluationRow.speedup_high, EvaluationRow.record)
                               .where(EvaluationRow.id.in_(evaluation_ids)))
        return {i: {"ref_ms": ref, "speedup_ci": None if low is None or high is None else [low, high],
                    "speedup_significant": (record or {}).get("speedup_significant")}
                for i, ref, low, high, record in rows}


def shrink_notes(sessions: Sessions, problem_refs: list[int]) -> dict[int, str | None]:
    """Each problem's shrink marker (its sizes), by problem row id."""
    with sessions() as session:
        rows = session.execute(select(ProblemRow.id, ProblemRow.source).where(ProblemRow.id.in_(problem_refs)))
        return {ref: shrink_note(source) for ref, source in rows}


def best_evaluation_id(sessions: Sessions, run_id: str) -> int | None:
    """The id of the fastest accepted evaluation of an optimize run (a model sweep's item points at it, so the
    sweep's report reads its timings and interval)."""
    with sessions() as session:
        return session.scalar(select(EvaluationRow.id).join(CandidateRow, CandidateRow.id == EvaluationRow.candidate_id)
                              .where(CandidateRow.run_id == run_id, EvaluationRow.verdict == Verdict.ACCEPTED.value,
                                     EvaluationRow.speedup.is_not(None))
                              .order_by(EvaluationRow.speedup.desc()).limit(1))
