"""Dollar cost of a call from a price table (USD per million tokens) that users can extend with a JSON file."""

from __future__ import annotations

import json
import os
from pathlib import Path

from agent.llm import Usage

# (input, output) USD per 1M tokens. Local servers (vLLM, SGLang, Ollama) cost nothing.
DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "o3": (2.00, 8.00),
    "o4-mini": (1.10, 4.40),
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "scripted": (0.0, 0.0),
}


class PriceTable:
    def __init__(self, extra_file: str | None = None) -> None:
        self.prices = dict(DEFAULT_PRICES)
        path = extra_file or os.environ.get("KERNELWRIGHT_PRICES")
        if path:
            self.prices.update(load_prices(Path(path)))

    def cost(self, model: str, usage: Usage) -> float:
        """Unknown models cost 0 (and say so nowhere else): add them with --prices to track spend."""
        prices = self.prices.get(model) or next((p for name, p in self.prices.items() if model.startswith(name)),
                                                (0.0, 0.0))
        return (usage.prompt_tokens * prices[0] + usage.completion_tokens * prices[1]) / 1e6

    def known(self, model: str) -> bool:
        return model in self.prices or any(model.startswith(name) for name in self.prices)


def load_prices(path: Path) -> dict[str, tuple[float, float]]:
    """`{"my-model": {"input": 0.5, "output": 1.5}, ...}` in USD per million tokens."""
    try:
        data = json.loads(path.read_text())
        return {name: (float(v["input"]), float(v["output"])) for name, v in data.items()}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: expected {{\"model\": {{\"input\": USD_per_1M, \"output\": USD_per_1M}}}} ({exc})")
