"""Tables: problems, runs, candidates, evaluations."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import JSON, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


UNVERSIONED = "unversioned"  # harness/decision/version.py UNVERSIONED: the store reads plain records


def _now() -> datetime:
    return datetime.now(timezone.utc)


class Base(DeclarativeBase):
    pass


class ProblemRow(Base):
    """One revision of one problem: a changed source is a new row (new fingerprint)."""

    __tablename__ = "problems"
    __table_args__ = (UniqueConstraint("fingerprint", name="uq_problem_fingerprint"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    suite: Mapped[str] = mapped_column(String(200), default="local")
    name: Mapped[str] = mapped_column(String(300), index=True)
    level: Mapped[int | None] = mapped_column(Integer, nullable=True)
    problem_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    fingerprint: Mapped[str] = mapped_column(String(64))
    path: Mapped[str | None] = mapped_column(Text, nullable=True)
    source: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=_now)


class RunRow(Base):
    """An `optimize`, `sweep` or `eval` invocation with its full configuration."""

    __tablename__ = "runs"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(32))
    model: Mapped[str | None] = mapped_column(String(200), nullable=True)
    config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    status: Mapped[str] = mapped_column(String(32), default="running")
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[datetime] = mapped_column(default=_now)
    finished_at: Mapped[datetime | None] = mapped_column(nullable=True)


class CandidateRow(Base):
    """One kernel source for one problem, with where it came from."""

    __tablename__ = "candidates"
    __table_args__ = (Index("ix_candidate_problem_hash", "problem_ref", "source_hash"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    problem_ref: Mapped[int] = mapped_column(ForeignKey("problems.id"))
    run_id: Mapped[str | None] = mapped_column(ForeignKey("runs.id"), nullable=True, index=True)
    round: Mapped[int | None] = mapped_column(Integer, nullable=True)
    slot: Mapped[int | None] = mapped_column(Integer, nullable=True)
    parent_id: Mapped[int | None] = mapped_column(ForeignKey("candidates.id"), nullable=True)
    source: Mapped[str] = mapped_column(Text)
    source_hash: Mapped[str] = mapped_column(String(64))
    origin: Mapped[str | None] = mapped_column(Text, nullable=True)  # a file path, or "llm"
    llm_usage: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(default=_now)

    problem: Mapped[ProblemRow] = relationship()
    evaluations: Mapped[list["EvaluationRow"]] = relationship(back_populates="candidate")


class EvaluationRow(Base):
    """One judgement of one candidate on one device: verdict, reasons, raw samples, the full record."""

    __tablename__ = "evaluations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    candidate_id: Mapped[int] = mapped_column(ForeignKey("candidates.id"), index=True)
    device: Mapped[str] = mapped_column(String(32))
    device_info: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    verdict: Mapped[str] = mapped_column(String(32), index=True)
    reasons: Mapped[list[str]] = mapped_column(JSON, default=list)
    speedup: Mapped[float | None] = mapped_column(Float, nullable=True)
    speedup_low: Mapped[float | None] = mapped_column(Float, nullable=True)
    speedup_high: Mapped[float | None] = mapped_column(Float, nullable=True)
    ref_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    candidate_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    ref_samples_ms: Mapped[list[float]] = mapped_column(JSON, default=list)
    candidate_samples_ms: Mapped[list[float]] = mapped_column(JSON, default=list)
    record: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # the whole harness.Evaluation
    created_at: Mapped[datetime] = mapped_column(default=_now)
    # the judge (revision 0003): the checks' version (harness/decision/version.py; "unversioned" before it), the
    # protocol path the timing took (parent-driven, child-staged; None when nothing was timed)
    checks_version: Mapped[str] = mapped_column(String(40), default=UNVERSIONED, server_default=UNVERSIONED,
                                                index=True)
    protocol: Mapped[str | None] = mapped_column(String(40), nullable=True)
    # the evaluation this one re-judged (`kernelwright rescore`): the old one stays, this one supersedes it
    rescore_of: Mapped[int | None] = mapped_column(ForeignKey("evaluations.id"), nullable=True)

    candidate: Mapped[CandidateRow] = relationship(back_populates="evaluations")


class LLMCallRow(Base):
    """Every prompt and reply, stored as it happens: a crash loses nothing and `--resume` replays them."""

    __tablename__ = "llm_calls"
    __table_args__ = (Index("ix_llm_call_slot", "run_id", "problem_ref", "round", "purpose", "slot"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id"))
    problem_ref: Mapped[int | None] = mapped_column(ForeignKey("problems.id"), nullable=True)
    round: Mapped[int] = mapped_column(Integer)
    purpose: Mapped[str] = mapped_column(String(16))  # coder | judge
    slot: Mapped[int] = mapped_column(Integer, default=0)  # which of the round's N candidates
    model: Mapped[str] = mapped_column(String(200))
    messages: Mapped[list[dict[str, str]]] = mapped_column(JSON)
    reply: Mapped[str | None] = mapped_column(Text, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    reasoning_tokens: Mapped[int] = mapped_column(Integer, default=0)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    latency_s: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[datetime] = mapped_column(default=_now)


class SweepItemRow(Base):
    """One problem of a sweep: written when it starts and when it ends, so a killed sweep resumes cleanly."""

    __tablename__ = "sweep_items"
    __table_args__ = (UniqueConstraint("run_id", "problem_key", name="uq_sweep_item"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id"), index=True)
    problem_ref: Mapped[int] = mapped_column(ForeignKey("problems.id"))
    problem_key: Mapped[str] = mapped_column(String(300))
    level: Mapped[int | None] = mapped_column(Integer, nullable=True)
    status: Mapped[str] = mapped_column(String(32), default="pending")  # pending | running | done
    verdict: Mapped[str | None] = mapped_column(String(32), nullable=True)  # a Verdict or an Unjudged value (harness/records.py)
    speedup: Mapped[float | None] = mapped_column(Float, nullable=True)
    evaluation_id: Mapped[int | None] = mapped_column(ForeignKey("evaluations.id"), nullable=True)
    child_run_id: Mapped[str | None] = mapped_column(String(64), nullable=True)  # the optimize run (optimize mode)
    detail: Mapped[str | None] = mapped_column(Text, nullable=True)
    candidate_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    wall_s: Mapped[float] = mapped_column(Float, default=0.0)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)


class BaselineRow(Base):
    """Eager and torch.compile timings of one problem revision on one device fingerprint, measured once."""

    __tablename__ = "baselines"
    __table_args__ = (UniqueConstraint("problem_fingerprint", "device_key", name="uq_baseline"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    problem_fingerprint: Mapped[str] = mapped_column(String(64))
    device_key: Mapped[str] = mapped_column(String(64))
    eager_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    compile_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    errors: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(default=_now)
    # how they were timed (None: in one child on its own clock, before revision 0002: never reused)
    method: Mapped[str | None] = mapped_column(String(40), nullable=True)
    compile_speedup: Mapped[float | None] = mapped_column(Float, nullable=True)  # eager / compiled, one clock
    compile_speedup_ci: Mapped[list[float] | None] = mapped_column(JSON, nullable=True)
    timing: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
