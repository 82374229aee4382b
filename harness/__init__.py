"""Evaluate one candidate against one problem on one device. Knows nothing of LLMs.

The names below are imported on first use, so `import harness.device` (the CLI's --help, say) does not pull
in pydantic and every stage. (`evaluate` is a function here; the module that defines it is harness/pipeline.py.)
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.decision.version import checks_version
    from harness.pipeline import evaluate
    from harness.policy import EvalPolicy
    from harness.records import Evaluation, Verdict

__all__ = ["EvalPolicy", "Evaluation", "Verdict", "checks_version", "evaluate"]
_HOMES = {"evaluate": "harness.pipeline", "checks_version": "harness.decision.version", "EvalPolicy": "harness.policy", "Evaluation": "harness.records",
          "Verdict": "harness.records"}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'harness' has no attribute {name!r}")
    return getattr(import_module(_HOMES[name]), name)
