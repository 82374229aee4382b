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


def test_a_run_with_an_unpriced_model_shows_an_unknown_cost_everywhere(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The summary, `runs list`, `runs show` and the report: never $0 for calls whose price nobody knows."""
    from agent.config import OptimizeConfig
    from agent.run_spec import ModelSpec
    from kernelwright.optimize_service import run_optimize
    from kernelwright.runs_service import run_details, runs_list, write_run_report
    from tests.agent.fake_executor import ScriptedExecutor, coder_reply, fake_kernel
    from tests.agent.fake_server import ScriptedServer

    reply = coder_reply(fake_kernel("accepted 1.5"))["content"]
    db = f"sqlite:///{tmp_path / 'u.db'}"
    monkeypatch.setenv("LOCAL_KEY", "local-secret")
    monkeypatch.delenv("KERNELWRIGHT_PRICES", raising=False)
    with ScriptedServer([("ok", reply)]) as server:
        models = ModelSpec(model="my-vllm-model", base_url=server.url, api_key_env="LOCAL_KEY")
        summary = run_optimize("relu", OptimizeConfig(device="cpu", rounds=1), models, db,
                               executor=ScriptedExecutor())
    assert summary["cost_usd"] is None and summary["unpriced_models"] == ["my-vllm-model"]
    (listed,) = runs_list(db)
    assert listed["cost_usd"] is None and run_details(db, summary["run_id"])["cost_usd"] is None
    html_path, _ = write_run_report(db, summary["run_id"], str(tmp_path / "report"))
    page = Path(html_path).read_text()
    assert "cost unknown (no price for my-vllm-model)" in page and "$0.0000" not in page
