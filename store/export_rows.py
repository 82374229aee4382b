"""Flat rows for dataset export: each evaluated candidate with its latest evaluation (a kernel re-judged by
`kernelwright rescore` or `gate` is exported with the newest verdict, never the one it superseded), its problem,
the coder call that wrote it, the judge advice it followed, and the harness that judged it. Plain dicts, so the
dataset builders in rewards/ stay pure."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from kernelbench.problem import shrink_note
from store.models import CandidateRow, EvaluationRow, LLMCallRow, ProblemRow


def candidate_rows(sessions: sessionmaker[Session], run_ids: list[str] | None = None) -> list[dict[str, Any]]:
    latest = select(func.max(EvaluationRow.id)).group_by(EvaluationRow.candidate_id)
    with sessions() as session:
        query = (select(CandidateRow, EvaluationRow, ProblemRow)
                 .join(EvaluationRow, EvaluationRow.candidate_id == CandidateRow.id)
                 .join(ProblemRow, ProblemRow.id == CandidateRow.problem_ref)
                 .where(CandidateRow.run_id.is_not(None), EvaluationRow.id.in_(latest)).order_by(EvaluationRow.id))
        if run_ids:
            query = query.where(CandidateRow.run_id.in_(run_ids))
        calls = _calls(session, run_ids)
        rows = []
        for candidate, evaluation, problem in session.execute(query):
            key = (candidate.run_id, candidate.problem_ref, candidate.round)
            coder = calls.get((*key, "coder", candidate.slot or 0))
            judge = calls.get((*key, "judge", 0))
            rows.append({
                "run_id": candidate.run_id, "candidate_id": candidate.id, "round": candidate.round,
                "problem": problem.name, "problem_key": _key(problem), "problem_fingerprint": problem.fingerprint,
                "shrunk": shrink_note(problem.source),
                "source": candidate.source, "source_hash": candidate.source_hash, "device": evaluation.device,
                "device_info": evaluation.device_info, "verdict": evaluation.verdict, "speedup": evaluation.speedup,
                "reasons": evaluation.reasons, "prompt": coder.messages if coder else None,
                "reply": coder.reply if coder else None, "judge_advice": judge.reply if judge else None,
                **_measured(evaluation), "judge": judged_by(evaluation)})
    return rows


def judged_by(evaluation: EvaluationRow) -> dict[str, Any]:
    """The harness that judged an evaluation: its checks' version, protocol path, device and policy level, and
    where the judgement is (the evaluation, and the one it re-judged)."""
    policy = (evaluation.record or {}).get("policy") or {}
    return {"checks_version": evaluation.checks_version, "protocol": evaluation.protocol,
            "device": evaluation.device, "static_policy": policy.get("static_policy"),
            "evaluation_id": evaluation.id, "rescore_of": evaluation.rescore_of,
            "judged_at": evaluation.created_at.isoformat() if evaluation.created_at else None}


def _measured(evaluation: EvaluationRow) -> dict[str, Any]:
    """The speedup's interval and whether it clears the noise floor: what the interval rewards read."""
    record = evaluation.record or {}
    low, high = evaluation.speedup_low, evaluation.speedup_high
    return {"speedup_ci": [low, high] if low is not None and high is not None else None,
            "speedup_significant": record.get("speedup_significant")}


def _calls(session: Session, run_ids: list[str] | None) -> dict[tuple[Any, ...], LLMCallRow]:
    query = select(LLMCallRow).where(LLMCallRow.reply.is_not(None)).order_by(LLMCallRow.id)
    if run_ids:
        query = query.where(LLMCallRow.run_id.in_(run_ids))
    return {(c.run_id, c.problem_ref, c.round, c.purpose, c.slot): c for c in session.scalars(query)}


def _key(problem: ProblemRow) -> str:
    stem = f"{problem.problem_id}_{problem.name}" if problem.problem_id is not None else problem.name
    return f"level{problem.level}/{stem}" if problem.level is not None else stem
