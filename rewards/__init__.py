"""Pure functions of evaluation records: rewards, exemplar selection. Nothing here runs a kernel."""

from rewards.exemplars import select_exemplars
from rewards.reward import reward

__all__ = ["reward", "select_exemplars"]
