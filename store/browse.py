"""Read-only queries behind `kernelwright runs ...`."""

from __future__ import annotations

from typing import Any, Iterable

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
            best = _sweep_best(session, run.id) if run.kind == "sweep" else _own_best(session, run.id)
            problem = (run.config or {}).get("problem", {}).get("key")
            count = len((run.config or {}).get("fingerprints", [])) or (1 if problem else 0)
            rows.append({"run_id": run.id, "kind": run.kind, "model": run.model, "status": run.status,
                         "created_at": run.created_at.isoformat(), "problems": count, "problem": problem,
                         "shrunk": _run_shrunk(session, run.config or {}), **best, **run_spend(session, run.id)})
    return rows


def _measurement(row: EvaluationRow | None, prefix: str = "") -> dict[str, Any]:
    """An evaluation's verdict, speedup, interval and significance (the keys start with `prefix`)."""
    if row is None:
        return {f"{prefix}speedup": None, f"{prefix}speedup_ci": None, f"{prefix}speedup_significant": None}
    return {f"{prefix}speedup": row.speedup, f"{prefix}speedup_ci": _interval(row),
            f"{prefix}speedup_significant": (row.record or {}).get("speedup_significant")}


def own_and_later(rows: Iterable[EvaluationRow]) -> tuple[list[EvaluationRow], dict[int, EvaluationRow]]:
    """A run's own evaluations (each candidate's first: a run evaluates a kernel once) and, per candidate, its
    latest later re-measurement (a `gate` or a re-judgement), which is shown beside the run's result, never as
    it. `rows` in id order."""
    own: dict[int, EvaluationRow] = {}
    later: dict[int, EvaluationRow] = {}
    for row in rows:
        if row.candidate_id in own:
            later[row.candidate_id] = row
        else:
            own[row.candidate_id] = row
    return list(own.values()), later


def _own_best(session: Session, run_id: str) -> dict[str, Any]:
    """The run's own fastest accepted evaluation, and the latest later re-measurement of that kernel."""
    rows = session.scalars(select(EvaluationRow).join(CandidateRow).where(CandidateRow.run_id == run_id)
                           .order_by(EvaluationRow.id))
    own, later = own_and_later(rows)
    accepted = [e for e in own if e.verdict == Verdict.ACCEPTED.value and e.speedup is not None]
    best = max(accepted, key=lambda e: e.speedup, default=None)  # type: ignore[arg-type, return-value]
    check = later.get(best.candidate_id) if best is not None else None
    return {**_measurement(best, "best_"), **_later(check)}


def _later(row: EvaluationRow | None) -> dict[str, Any]:
    if row is None:
        return {"later_check": None}
    return {"later_check": {"verdict": row.verdict, **_measurement(row), "evaluation_id": row.id,
                            "evaluated_at": row.created_at.isoformat()}}


def _sweep_best(session: Session, run_id: str) -> dict[str, Any]:
    """The sweep's fastest accepted problem, with the interval of the evaluation behind it (a store from before
    items named their evaluation has the speedup alone)."""
    items = session.scalars(select(SweepItemRow).where(SweepItemRow.run_id == run_id,
                                                       SweepItemRow.verdict == Verdict.ACCEPTED.value,
                                                       SweepItemRow.speedup.is_not(None)))
    best = max(items, key=lambda item: item.speedup, default=None)  # type: ignore[arg-type, return-value]
    if best is None or best.evaluation_id is None:
        return {"best_speedup": best.speedup if best else None, "best_speedup_ci": None,
                "best_speedup_significant": None, "later_check": None}
    return {**_measurement(session.get(EvaluationRow, best.evaluation_id), "best_"), "later_check": None}


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
    """Every evaluation the run made, in order: round, problem, verdict, speedup, first reason, kernel source; a
    later re-measurement of a kernel (gate, re-judgement) is no row of its own but its `later_check`."""
    with sessions() as session:
        query = (select(EvaluationRow).join(CandidateRow).where(CandidateRow.run_id == run_id)
                 .order_by(EvaluationRow.id))
        own, later = own_and_later(session.scalars(query))
        rows = []
        for e in own:
            c = e.candidate
            p = session.get(ProblemRow, c.problem_ref)
            rows.append({"round": (c.round or 0) + 1 if c.round is not None else None, "slot": c.slot,
                         "problem": p.name, "level": p.level, "shrunk": shrink_note(p.source), "verdict": e.verdict,
                         **_measurement(e), "ref_ms": e.ref_ms, "candidate_ms": e.candidate_ms,
                         "reason": (e.reasons or [""])[0], "candidate_id": c.id,
                         "source": c.source, "evaluation_id": e.id, "device": e.device,
                         **_later(later.get(c.id))})
        return rows


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
    """The fastest accepted kernels of problems whose name or key contains `name`, across all runs: each kernel's
    best result as its runs measured it, with its latest later re-measurement beside it."""
    with sessions() as session:
        query = (select(EvaluationRow).join(CandidateRow).join(ProblemRow, ProblemRow.id == CandidateRow.problem_ref)
                 .where(func.lower(ProblemRow.name).contains(name.lower().split("/")[-1].split("_", 1)[-1]))
                 .order_by(EvaluationRow.id))
        own, later = own_and_later(session.scalars(query))
        kernels: dict[tuple[str, str, str], dict[str, Any]] = {}  # one row per kernel (source hash) and device
        for e in sorted((e for e in own if e.verdict == Verdict.ACCEPTED.value and e.speedup is not None),
                        key=lambda e: -e.speedup):  # type: ignore[operator]
            c = e.candidate
            p = session.get(ProblemRow, c.problem_ref)
            row = kernels.setdefault((p.fingerprint, c.source_hash, e.device), {
                "problem": p.name, "level": p.level, "shrunk": shrink_note(p.source),
                "fingerprint": p.fingerprint[:12], "run_id": c.run_id,
                "candidate_id": c.id, "kernel": c.source_hash[:12], **_measurement(e), "speedups": [],
                "device": e.device, "evaluated_at": e.created_at.isoformat(), **_later(later.get(c.id))})
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
