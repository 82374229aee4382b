"""Evaluate one candidate against one problem on one device. Knows nothing of LLMs."""

from harness.evaluate import evaluate
from harness.policy import EvalPolicy
from harness.records import Evaluation, Verdict

__all__ = ["EvalPolicy", "Evaluation", "Verdict", "evaluate"]
