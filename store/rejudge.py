"""What `kernelwright rescore` reads: each stored kernel with its latest evaluation, and the order in which the
checks' versions first judged something in this store (a version is a digest, not a number: "older" is store
order)."""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from store.models import UNVERSIONED, CandidateRow, EvaluationRow


class Judged(NamedTuple):
    """A stored kernel (its problem loaded) and its latest evaluation: the verdict exports read."""

    candidate: CandidateRow
    evaluation: EvaluationRow


def latest_judgements(sessions: sessionmaker[Session], run_id: str | None = None) -> list[Judged]:
    """Every candidate with its latest evaluation (only candidates of `run_id`, when given), oldest first."""
    latest = select(func.max(EvaluationRow.id)).group_by(EvaluationRow.candidate_id)
    query = (select(CandidateRow, EvaluationRow).join(EvaluationRow, EvaluationRow.candidate_id == CandidateRow.id)
             .where(EvaluationRow.id.in_(latest)).order_by(CandidateRow.id))
    if run_id:
        query = query.where(CandidateRow.run_id == run_id)
    with sessions() as session:
        rows = [Judged(candidate, evaluation) for candidate, evaluation in session.execute(query)]
        for row in rows:
            row.candidate.problem  # load the relationship while the session is open
    return rows


def versions_in_order(sessions: sessionmaker[Session]) -> list[str]:
    """The checks' versions that judged something here, in the order they first did ("unversioned" first)."""
    query = (select(EvaluationRow.checks_version, func.min(EvaluationRow.id).label("first"))
             .group_by(EvaluationRow.checks_version).order_by("first"))
    with sessions() as session:
        versions = [version for version, _ in session.execute(query)]
    return sorted(versions, key=lambda version: version != UNVERSIONED)
