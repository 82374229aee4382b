"""Results store: SQLAlchemy models and queries. SQLite by default, any SQLAlchemy URL for teams."""

from store.db import default_url, open_store, store_location
from store.models import BaselineRow, CandidateRow, EvaluationRow, LLMCallRow, ProblemRow, RunRow, SweepItemRow
from store.results import ScreenedEvaluation, record_evaluation

__all__ = ["BaselineRow", "CandidateRow", "EvaluationRow", "LLMCallRow", "ProblemRow", "RunRow", "SweepItemRow", "default_url", "open_store", "store_location",
           "record_evaluation", "ScreenedEvaluation"]
