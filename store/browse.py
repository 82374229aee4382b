"""Read-only queries behind `kernelwright runs ...`."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from harness.records import Verdict
from kernelbench.problem import shrink_note
from store.models import CandidateRow, EvaluationRow, LLMCallRow, ProblemRow, RunRow, SweepItemRow
from store.runs import run_spend


def list_runs(sessions: sessionmaker[Session], limit: int = 50) -> list[dict[str, Any]]:
    with sessions() as session:
        runs = list(session.scalars(select(RunRow).order_by(RunRow.created_at.desc()).limit(limit)))
        rows = []
        for run in runs:
            best = session.scalar(select(func.max(EvaluationRow.speedup)).join(CandidateRow).where(
                CandidateRow.run_id == run.id, EvaluationRow.verdict == Verdict.ACCEPTED.value))
            if run.kind == "sweep":
                best = session.scalar(select(func.max(SweepItemRow.speedup)).where(
                    SweepItemRow.run_id == run.id, SweepItemRow.verdict == Verdict.ACCEPTED.value))
            problem = (run.config or {}).get("problem", {}).get("key")
            count = len((run.config or {}).get("fingerprints", [])) or (1 if problem else 0)
            rows.append({"run_id": run.id, "kind": run.kind, "model": run.model, "status": run.status,
                         "created_at": run.created_at.isoformat(), "problems": count, "problem": problem,
                         "shrunk": _run_shrunk(session, run.config or {}),
                         "best_speedup": best, **run_spend(session, run.id)})
    return rows


def _run_shrunk(session: Session, config: dict[str, Any]) -> str | None:
    """An optimize run's problem's size changes when it was shrunk; `all` for a sweep over shrunk problems."""
    if (config.get("sweep") or {}).get("shrink"):
        return "all"
    fingerprint = (config.get("problem") or {}).get("fingerprint")
    if not fingerprint:
        return None
    source = session.scalar(select(ProblemRow.source).where(ProblemRow.fingerprint == fingerprint))
    return shrink_note(source) if source else None


def run_evaluations(sessions: sessionmaker[Session], run_id: str) -> list[dict[str, Any]]:
    """Every evaluation of a run, in order: round, problem, verdict, speedup, first reason, kernel source."""
    with sessions() as session:
        query = (select(CandidateRow, EvaluationRow, ProblemRow).join(EvaluationRow)
                 .join(ProblemRow, ProblemRow.id == CandidateRow.problem_ref)
                 .where(CandidateRow.run_id == run_id).order_by(EvaluationRow.id))
        return [{"round": (c.round or 0) + 1 if c.round is not None else None, "slot": c.slot, "problem": p.name,
                 "level": p.level, "shrunk": shrink_note(p.source), "verdict": e.verdict, "speedup": e.speedup,
                 "speedup_ci": _interval(e), "speedup_significant": (e.record or {}).get("speedup_significant"),
                 "ref_ms": e.ref_ms, "candidate_ms": e.candidate_ms,
                 "reason": (e.reasons or [""])[0], "candidate_id": c.id,
                 "source": c.source, "evaluation_id": e.id, "device": e.device}
                for c, e, p in session.execute(query)]


def _interval(row: EvaluationRow) -> list[float] | None:
    return None if row.speedup_low is None or row.speedup_high is None else [row.speedup_low, row.speedup_high]


def run_coder_calls(sessions: sessionmaker[Session], run_id: str) -> list[dict[str, Any]]:
    """The coder calls of a run (the last try per round and slot): what each slot of each round got back."""
    with sessions() as session:
        query = (select(LLMCallRow, ProblemRow).join(ProblemRow, ProblemRow.id == LLMCallRow.problem_ref)
                 .where(LLMCallRow.run_id == run_id, LLMCallRow.purpose == "coder").order_by(LLMCallRow.id))
        calls = {(p.name, c.round, c.slot): {"round": c.round + 1, "slot": c.slot, "problem": p.name, "level": p.level,
                                             "shrunk": shrink_note(p.source), "error": c.error, "reply": c.reply}
                 for c, p in session.execute(query)}
    return list(calls.values())


def run_judge_calls(sessions: sessionmaker[Session], run_id: str) -> list[dict[str, Any]]:
    """The judge calls of a run, in order: the round they advise (from 1), the slot (1 is a retry), the reply."""
    with sessions() as session:
        query = (select(LLMCallRow).where(LLMCallRow.run_id == run_id, LLMCallRow.purpose == "judge")
                 .order_by(LLMCallRow.id))
        return [{"round": c.round + 1, "slot": c.slot, "reply": c.reply, "error": c.error}
                for c in session.scalars(query)]


def run_costs(sessions: sessionmaker[Session], run_id: str) -> dict[str, dict[str, Any]]:
    """Calls, tokens and dollars of a run, per purpose (coder, judge)."""
    with sessions() as session:
        rows = session.execute(
            select(LLMCallRow.purpose, func.count(LLMCallRow.id), func.coalesce(func.sum(LLMCallRow.prompt_tokens), 0),
                   func.coalesce(func.sum(LLMCallRow.completion_tokens), 0),
                   func.coalesce(func.sum(LLMCallRow.cost_usd), 0.0))
            .where(LLMCallRow.run_id == run_id).group_by(LLMCallRow.purpose).order_by(LLMCallRow.purpose))
        return {purpose: {"calls": calls, "prompt_tokens": int(prompt), "completion_tokens": int(completion),
                          "cost_usd": float(cost)} for purpose, calls, prompt, completion, cost in rows}


def best_for_problem(sessions: sessionmaker[Session], name: str, limit: int = 10) -> list[dict[str, Any]]:
    """The fastest accepted kernels of problems whose name or key contains `name`, across all runs."""
    with sessions() as session:
        query = (select(CandidateRow, EvaluationRow, ProblemRow).join(EvaluationRow)
                 .join(ProblemRow, ProblemRow.id == CandidateRow.problem_ref)
                 .where(EvaluationRow.verdict == Verdict.ACCEPTED.value, EvaluationRow.speedup.is_not(None),
                        func.lower(ProblemRow.name).contains(name.lower().split("/")[-1].split("_", 1)[-1]))
                 .order_by(EvaluationRow.speedup.desc()))
        kernels: dict[tuple[str, str, str], dict[str, Any]] = {}  # one row per kernel (source hash) and device
        for c, e, p in session.execute(query):
            row = kernels.setdefault((p.fingerprint, c.source_hash, e.device), {
                "problem": p.name, "level": p.level, "shrunk": shrink_note(p.source),
                "fingerprint": p.fingerprint[:12], "run_id": c.run_id,
                "candidate_id": c.id, "kernel": c.source_hash[:12], "speedup": e.speedup, "speedups": [],
                "device": e.device, "evaluated_at": e.created_at.isoformat()})
            row["speedups"].append(e.speedup)
        rows = list(kernels.values())[:limit]
        for row in rows:  # the best measurement leads; its spread says how far it reproduces
            row["evaluations"], row["slowest"] = len(row["speedups"]), min(row.pop("speedups"))
        return rows


def get_run_row(sessions: sessionmaker[Session], run_id: str) -> dict[str, Any] | None:
    with sessions() as session:
        run = session.get(RunRow, run_id)
        if run is None:
            return None
        return {"run_id": run.id, "kind": run.kind, "model": run.model, "status": run.status, "config": run.config,
                "created_at": run.created_at.isoformat(), **run_spend(session, run.id)}


def run_kernels(sessions: sessionmaker[Session], run_id: str) -> dict[str, str]:
    """Kernel sources of a run, by report label: `<problem>-c<candidate>` (optimize) or problem key (sweep)."""
    with sessions() as session:
        items = list(session.scalars(select(SweepItemRow).where(SweepItemRow.run_id == run_id)))
        if items:
            kernels = {}
            for item in items:
                if item.evaluation_id is not None:
                    evaluation = session.get(EvaluationRow, item.evaluation_id)
                    kernels[item.problem_key] = evaluation.candidate.source
            return kernels
        query = (select(CandidateRow, ProblemRow).join(ProblemRow, ProblemRow.id == CandidateRow.problem_ref)
                 .where(CandidateRow.run_id == run_id))
        return {f"{p.name}-c{c.id}": c.source for c, p in session.execute(query)}
