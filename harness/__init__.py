"""Evaluate one candidate against one problem on one device. Knows nothing of LLMs.

Exports are imported lazily: the processes started with `python -m harness.<module>` (the jail, the child, the
build process) must not pay for importing the whole harness first."""

from typing import Any

__all__ = ["EvalPolicy", "Evaluation", "Verdict", "evaluate"]


def __getattr__(name: str) -> Any:
    if name == "evaluate":
        from harness.evaluate import evaluate

        return evaluate
    if name == "EvalPolicy":
        from harness.policy import EvalPolicy

        return EvalPolicy
    if name in ("Evaluation", "Verdict"):
        from harness import records

        return getattr(records, name)
    raise AttributeError(name)
