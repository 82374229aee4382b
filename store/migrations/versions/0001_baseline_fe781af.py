"""Baseline: the schema of fe781af, the last release without schema versions.

A fresh database gets every table here. A database without a revision (made by fe781af or an earlier release) keeps
its rows and gets what it lacks: the tables, columns and indexes added before versions existed (llm_calls in
4d2b8d3, candidates.slot in fce490d, sweep_items in eff8d2a, sweep_items.candidate_ms and baselines in be839f7).
The tables are written out here, not imported from store.models: a revision describes its own point in time.

Revision ID: 0001
Revises:
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

schema = sa.MetaData()

sa.Table(
    "problems", schema,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("suite", sa.String(200), nullable=False),
    sa.Column("name", sa.String(300), nullable=False, index=True),
    sa.Column("level", sa.Integer, nullable=True),
    sa.Column("problem_id", sa.Integer, nullable=True),
    sa.Column("fingerprint", sa.String(64), nullable=False),
    sa.Column("path", sa.Text, nullable=True),
    sa.Column("source", sa.Text, nullable=False),
    sa.Column("created_at", sa.DateTime, nullable=False),
    sa.UniqueConstraint("fingerprint", name="uq_problem_fingerprint"),
)

sa.Table(
    "runs", schema,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("model", sa.String(200), nullable=True),
    sa.Column("config", sa.JSON, nullable=False),
    sa.Column("status", sa.String(32), nullable=False),
    sa.Column("cost_usd", sa.Float, nullable=False),
    sa.Column("created_at", sa.DateTime, nullable=False),
    sa.Column("finished_at", sa.DateTime, nullable=True),
)

sa.Table(
    "candidates", schema,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("problem_ref", sa.Integer, sa.ForeignKey("problems.id"), nullable=False),
    sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id"), nullable=True, index=True),
    sa.Column("round", sa.Integer, nullable=True),
    sa.Column("slot", sa.Integer, nullable=True),
    sa.Column("parent_id", sa.Integer, sa.ForeignKey("candidates.id"), nullable=True),
    sa.Column("source", sa.Text, nullable=False),
    sa.Column("source_hash", sa.String(64), nullable=False),
    sa.Column("origin", sa.Text, nullable=True),
    sa.Column("llm_usage", sa.JSON, nullable=False),
    sa.Column("created_at", sa.DateTime, nullable=False),
    sa.Index("ix_candidate_problem_hash", "problem_ref", "source_hash"),
)

sa.Table(
    "evaluations", schema,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("candidate_id", sa.Integer, sa.ForeignKey("candidates.id"), nullable=False, index=True),
    sa.Column("device", sa.String(32), nullable=False),
    sa.Column("device_info", sa.JSON, nullable=False),
    sa.Column("verdict", sa.String(32), nullable=False, index=True),
    sa.Column("reasons", sa.JSON, nullable=False),
    sa.Column("speedup", sa.Float, nullable=True),
    sa.Column("speedup_low", sa.Float, nullable=True),
    sa.Column("speedup_high", sa.Float, nullable=True),
    sa.Column("ref_ms", sa.Float, nullable=True),
    sa.Column("candidate_ms", sa.Float, nullable=True),
    sa.Column("ref_samples_ms", sa.JSON, nullable=False),
    sa.Column("candidate_samples_ms", sa.JSON, nullable=False),
    sa.Column("record", sa.JSON, nullable=False),
    sa.Column("created_at", sa.DateTime, nullable=False),
)

sa.Table(
    "llm_calls", schema,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id"), nullable=False),
    sa.Column("problem_ref", sa.Integer, sa.ForeignKey("problems.id"), nullable=True),
    sa.Column("round", sa.Integer, nullable=False),
    sa.Column("purpose", sa.String(16), nullable=False),
    sa.Column("slot", sa.Integer, nullable=False),
    sa.Column("model", sa.String(200), nullable=False),
    sa.Column("messages", sa.JSON, nullable=False),
    sa.Column("reply", sa.Text, nullable=True),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("prompt_tokens", sa.Integer, nullable=False),
    sa.Column("completion_tokens", sa.Integer, nullable=False),
    sa.Column("reasoning_tokens", sa.Integer, nullable=False),
    sa.Column("cost_usd", sa.Float, nullable=False),
    sa.Column("latency_s", sa.Float, nullable=False),
    sa.Column("created_at", sa.DateTime, nullable=False),
    sa.Index("ix_llm_call_slot", "run_id", "problem_ref", "round", "purpose", "slot"),
)

sa.Table(
    "sweep_items", schema,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id"), nullable=False, index=True),
    sa.Column("problem_ref", sa.Integer, sa.ForeignKey("problems.id"), nullable=False),
    sa.Column("problem_key", sa.String(300), nullable=False),
    sa.Column("level", sa.Integer, nullable=True),
    sa.Column("status", sa.String(32), nullable=False),
    sa.Column("verdict", sa.String(32), nullable=True),
    sa.Column("speedup", sa.Float, nullable=True),
    sa.Column("evaluation_id", sa.Integer, sa.ForeignKey("evaluations.id"), nullable=True),
    sa.Column("child_run_id", sa.String(64), nullable=True),
    sa.Column("detail", sa.Text, nullable=True),
    sa.Column("candidate_ms", sa.Float, nullable=True),
    sa.Column("wall_s", sa.Float, nullable=False),
    sa.Column("cost_usd", sa.Float, nullable=False),
    sa.UniqueConstraint("run_id", "problem_key", name="uq_sweep_item"),
)

sa.Table(
    "baselines", schema,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("problem_fingerprint", sa.String(64), nullable=False),
    sa.Column("device_key", sa.String(64), nullable=False),
    sa.Column("eager_ms", sa.Float, nullable=True),
    sa.Column("compile_ms", sa.Float, nullable=True),
    sa.Column("errors", sa.JSON, nullable=False),
    sa.Column("created_at", sa.DateTime, nullable=False),
    sa.UniqueConstraint("problem_fingerprint", "device_key", name="uq_baseline"),
)


def upgrade() -> None:
    bind = op.get_bind()
    schema.create_all(bind, checkfirst=True)  # the tables an earlier release did not have yet, with their indexes
    inspector = sa.inspect(bind)
    for table in schema.sorted_tables:
        present = {column["name"] for column in inspector.get_columns(table.name)}
        for column in table.columns:
            if column.name not in present:  # every column added before versions existed is nullable
                op.add_column(table.name, column._copy())
        indexed = {index["name"] for index in inspector.get_indexes(table.name)}
        for index in table.indexes:
            if index.name not in indexed:
                index.create(bind)


def downgrade() -> None:
    schema.drop_all(op.get_bind())
