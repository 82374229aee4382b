"""Dollar cost of a call from a price table (USD per million tokens) that users can extend with a JSON file.

A model is priced by its exact name, or by an alias a price file declares (`{"my-gpt": {"same_as": "gpt-5"}}`).
There is no prefix guessing: `gpt-5-pro` is not `gpt-5`. A model without a price has an unknown cost, which the
caller must say (a dollar budget cannot be kept with it)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from agent.llm import Usage

# (input, output) USD per 1M tokens, by exact model name.
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

PRICE_FORMAT = '{"model": {"input": USD_per_1M, "output": USD_per_1M}} or {"alias": {"same_as": "model"}}'


class PriceTable:
    def __init__(self, extra_file: str | None = None) -> None:
        self.prices = dict(DEFAULT_PRICES)
        path = extra_file or os.environ.get("KERNELWRIGHT_PRICES")
        if path:
            self.prices.update(load_prices(Path(path)))

    def price(self, model: str) -> tuple[float, float] | None:
        """(input, output) USD per 1M tokens for exactly this model name, or None when it has no price."""
        return self.prices.get(model)

    def known(self, model: str) -> bool:
        return model in self.prices

    def cost(self, model: str, usage: Usage) -> float:
        """The call's cost; 0.0 for a model without a price, so callers check `known` and report the cost as
        unknown (a run with a dollar budget and an unpriced model is refused before it starts)."""
        prices = self.price(model) or (0.0, 0.0)
        return (usage.prompt_tokens * prices[0] + usage.completion_tokens * prices[1]) / 1e6


def load_prices(path: Path) -> dict[str, tuple[float, float]]:
    """`{"my-model": {"input": 0.5, "output": 1.5}, "my-alias": {"same_as": "gpt-5"}}` in USD per million
    tokens; an alias resolves to its model's price (from this file or the built-in table)."""
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise TypeError("the top level is not an object")
        prices = {name: (float(v["input"]), float(v["output"])) for name, v in data.items() if "same_as" not in v}
        known = {**DEFAULT_PRICES, **prices}
        for name, v in data.items():
            if "same_as" in v:
                if v["same_as"] not in known:
                    raise KeyError(f"{name} is the same as {v['same_as']!r}, which has no price")
                prices[name] = known[v["same_as"]]
        return prices
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: expected {PRICE_FORMAT} ({exc})") from None
