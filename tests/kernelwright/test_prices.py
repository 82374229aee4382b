"""Prices: exact model names (or declared aliases), and a dollar budget is never kept with a model whose calls
cost an unknown amount."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.llm import Usage
from agent.pricing import PriceTable, load_prices

KERNELWRIGHT = str(Path(sys.executable).parent / "kernelwright")


def _optimize(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LOCAL_KEY": "local-secret", "KERNELWRIGHT_HOME": str(tmp_path / "home")}
    env.pop("KERNELWRIGHT_PRICES", None)
    return subprocess.run([KERNELWRIGHT, "optimize", "relu", "--device", "cpu", "--base-url",
                           "http://127.0.0.1:9/v1", "--api-key-env", "LOCAL_KEY", "--db",
                           f"sqlite:///{tmp_path / 'p.db'}", *args], capture_output=True, text=True, timeout=300,
                          env=env)


def test_prices_are_by_exact_name_not_by_prefix() -> None:
    table = PriceTable()
    assert table.known("gpt-5") and not table.known("gpt-5-pro") and not table.known("o3-pro")
    usage = Usage(prompt_tokens=1_000_000, completion_tokens=0)
    assert table.cost("gpt-5", usage) == pytest.approx(1.25)


def test_a_price_file_declares_models_and_aliases(tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"my-model": {"input": 1, "output": 2}, "my-gpt": {"same_as": "gpt-5"},
                                  "mine-too": {"same_as": "my-model"}}))
    assert load_prices(prices) == {"my-model": (1.0, 2.0), "my-gpt": (1.25, 10.0), "mine-too": (1.0, 2.0)}
    prices.write_text(json.dumps({"x": {"same_as": "nothing-priced"}}))
    with pytest.raises(ValueError, match="no price"):
        load_prices(prices)


def test_a_dollar_budget_with_an_unpriced_model_is_refused_before_the_run(tmp_path: Path) -> None:
    result = _optimize(tmp_path, "--model", "gpt-5-pro", "--budget-usd", "0.001")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    message = " ".join(result.stderr.split())
    assert "--budget-usd needs a price for gpt-5-pro" in message and "--prices FILE" in message
    assert not (tmp_path / "home").exists() or not any((tmp_path / "home").glob("2*"))  # no run was started


def test_a_price_makes_the_budget_acceptable(tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"gpt-5-pro": {"input": 15, "output": 120}}))
    result = _optimize(tmp_path, "--model", "gpt-5-pro", "--budget-usd", "0.001", "--prices", str(prices),
                       "--rounds", "1")
    assert "needs a price" not in result.stderr and "cannot reach" in result.stderr  # as far as the endpoint
    assert "Traceback" not in result.stderr
