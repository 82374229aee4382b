"""Runs: their rows, their LLM calls and their candidates, for the agent's persistence and `--resume`."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session, sessionmaker

from harness.records import Evaluation, Verdict
from kernelbench.problem import Problem
from store.models import CandidateRow, EvaluationRow, LLMCallRow, ProblemRow, RunRow, SweepItemRow
from store.results import upsert_problem


def create_run(sessions: sessionmaker[Session], kind: str, model: str | None, config: dict[str, Any]) -> str:
    run_id = f"{datetime.now(timezone.utc):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"
    with sessions.begin() as session:
        session.add(RunRow(id=run_id, kind=kind, model=model, config=config, status="running"))
    return run_id


def get_run(sessions: sessionmaker[Session], run_id: str) -> RunRow | None:
    with sessions() as session:
        return session.get(RunRow, run_id)


def set_run_status(sessions: sessionmaker[Session], run_id: str, status: str) -> None:
    with sessions.begin() as session:
        row = session.get(RunRow, run_id)
        if row is None:
            return
        row.status = status
        row.cost_usd = run_totals(session, run_id)["cost_usd"]
        row.finished_at = None if status == "running" else datetime.now(timezone.utc)


def record_llm_call(sessions: sessionmaker[Session], run_id: str, problem: Problem, round_: int, purpose: str,
                    slot: int, model: str, messages: list[dict[str, str]], reply: Any | None,
                    error: str | None = None) -> None:
    with sessions.begin() as session:
        problem_row = upsert_problem(session, problem)
        usage = reply.usage if reply is not None else None
        session.add(LLMCallRow(
            run_id=run_id, problem_ref=problem_row.id, round=round_, purpose=purpose, slot=slot, model=model,
            messages=messages, reply=reply.content if reply is not None else None, error=error,
            prompt_tokens=usage.prompt_tokens if usage else 0, completion_tokens=usage.completion_tokens if usage else 0,
            reasoning_tokens=usage.reasoning_tokens if usage else 0,
            cost_usd=reply.cost_usd if reply is not None else 0.0, latency_s=reply.latency_s if reply is not None else 0.0))


def finished_llm_call(sessions: sessionmaker[Session], run_id: str, problem: Problem, round_: int, purpose: str,
                      slot: int) -> LLMCallRow | None:
    """A successful call already made for this slot (resume replays it instead of paying again)."""
    problem_ref = select(ProblemRow.id).where(ProblemRow.fingerprint == problem.fingerprint).scalar_subquery()
    with sessions() as session:
        return session.scalar(select(LLMCallRow).where(
            LLMCallRow.run_id == run_id, LLMCallRow.problem_ref == problem_ref, LLMCallRow.round == round_,
            LLMCallRow.purpose == purpose, LLMCallRow.slot == slot, LLMCallRow.reply.is_not(None))
            .order_by(LLMCallRow.id.desc()).limit(1))


def run_evaluation(sessions: sessionmaker[Session], run_id: str, problem: Problem, source_hash: str) -> Evaluation | None:
    """The evaluation of identical source already made in this run (never evaluate the same kernel twice)."""
    with sessions() as session:
        row = session.scalar(
            select(EvaluationRow).join(CandidateRow).where(
                CandidateRow.run_id == run_id, CandidateRow.source_hash == source_hash,
                CandidateRow.problem.has(fingerprint=problem.fingerprint))
            .order_by(EvaluationRow.id.desc()).limit(1))
        return Evaluation.model_validate(row.record) if row is not None else None


def set_run_profile(sessions: sessionmaker[Session], run_id: str, problem: Problem, source_hash: str,
                    metrics: dict[str, Any]) -> None:
    """Attach the profiler's records to the run's latest evaluation of this kernel (its verdict is untouched)."""
    with sessions.begin() as session:
        row = session.scalar(
            select(EvaluationRow).join(CandidateRow).where(
                CandidateRow.run_id == run_id, CandidateRow.source_hash == source_hash,
                CandidateRow.problem.has(fingerprint=problem.fingerprint))
            .order_by(EvaluationRow.id.desc()).limit(1))
        if row is not None:
            row.record = {**row.record, "metrics": metrics}


def _family(run_id: str) -> Any:
    """The run and the runs it started (a sweep's optimize runs, one per problem), as a SQL list of run ids."""
    started = select(SweepItemRow.child_run_id).where(SweepItemRow.run_id == run_id,
                                                      SweepItemRow.child_run_id.is_not(None))
    return or_(LLMCallRow.run_id == run_id, LLMCallRow.run_id.in_(started))


def run_totals(session: Session, run_id: str) -> dict[str, Any]:
    """LLM calls, tokens and dollars of a run, the calls of the runs it started included (a sweep's are made by
    its problems' optimize runs): the one sum behind every total shown, stored or kept to a budget."""
    row = session.execute(select(func.count(LLMCallRow.id), func.coalesce(func.sum(LLMCallRow.prompt_tokens), 0),
                                 func.coalesce(func.sum(LLMCallRow.completion_tokens), 0),
                                 func.coalesce(func.sum(LLMCallRow.cost_usd), 0.0))
                          .where(_family(run_id))).one()
    return {"llm_calls": row[0], "prompt_tokens": int(row[1]), "completion_tokens": int(row[2]),
            "cost_usd": float(row[3])}


def unpriced_models(session: Session, run_id: str) -> list[str]:
    """The models without a price that the run, or a run it started, called (its cost is unknown, never $0)."""
    started = select(SweepItemRow.child_run_id).where(SweepItemRow.run_id == run_id)
    configs = session.scalars(select(RunRow.config).where(or_(RunRow.id == run_id, RunRow.id.in_(started))))
    return list(dict.fromkeys(name for config in configs for name in (config or {}).get("unpriced_models") or []))


def run_spend(session: Session, run_id: str) -> dict[str, Any]:
    """`run_totals`, with the cost None and `unpriced_models` named where a model without a price was called."""
    spent, unpriced = run_totals(session, run_id), unpriced_models(session, run_id)
    return {**spent, "cost_usd": None, "unpriced_models": unpriced} if unpriced else spent


def totals(sessions: sessionmaker[Session], run_id: str) -> dict[str, Any]:
    with sessions() as session:
        return run_totals(session, run_id)


def spend(sessions: sessionmaker[Session], run_id: str) -> dict[str, Any]:
    with sessions() as session:
        return run_spend(session, run_id)


def accepted_in_problem(sessions: sessionmaker[Session], problem: Problem, before: datetime | None = None,
                        run_id: str | None = None) -> list[tuple[str, float]]:
    """(source, speedup) of every accepted evaluation of this exact problem, any run, in the order they were
    stored: exemplar material. With `before`, only what the store held then, plus the kernels of `run_id` (a
    rerun sees the pool its original run saw, and its own kernels as the original saw its own)."""
    query = (select(CandidateRow.source, EvaluationRow.speedup).join(EvaluationRow).where(
        EvaluationRow.verdict == Verdict.ACCEPTED.value, EvaluationRow.speedup.is_not(None),
        CandidateRow.problem.has(fingerprint=problem.fingerprint)).order_by(EvaluationRow.id))
    if before is not None:
        query = query.where(or_(EvaluationRow.created_at < before, CandidateRow.run_id == run_id))
    with sessions() as session:
        rows = session.execute(query).all()
    return [(source, float(speedup)) for source, speedup in rows]


def set_run_config(sessions: sessionmaker[Session], run_id: str, **fields: Any) -> None:
    """Add fields to a run's stored config (what a rerun must keep to be resumed alike)."""
    with sessions.begin() as session:
        row = session.get(RunRow, run_id)
        if row is not None:
            row.config = {**(row.config or {}), **fields}
