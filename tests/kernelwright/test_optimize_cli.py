"""`kernelwright optimize` as a new user runs it: no key, then a local OpenAI-compatible server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.agent.fake_server import ScriptedServer
from tests.conftest import RELU_CANDIDATE

KERNELWRIGHT = str(Path(sys.executable).parent / "kernelwright")


def _run(args: list[str], env: dict[str, str], timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KERNELWRIGHT, *args], capture_output=True, text=True, timeout=timeout, env=env)


def test_optimize_without_key_or_endpoint_explains_the_options(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    result = _run(["optimize", "relu", "--device", "cpu", "--db", f"sqlite:///{tmp_path / 'x.db'}"], env)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    message = " ".join(result.stderr.split())
    assert "OPENAI_API_KEY" in message and "--base-url" in message and "scripted:FILE" in message


@pytest.mark.slow
def test_optimize_against_a_local_openai_compatible_server(tmp_path: Path) -> None:
    kernel = f"Here it is:\n```python\n{RELU_CANDIDATE.read_text()}```"
    steps = [("ok", kernel), ("status", 429), ("ok", '{"diagnosis": "memory bound", "change": "none"}'),
             ("ok", kernel)]
    env = {**os.environ, "KERNELWRIGHT_HOME": str(tmp_path / "home"), "LOCAL_KEY": "local-secret"}
    db = f"sqlite:///{tmp_path / 'opt.db'}"
    with ScriptedServer(steps) as server:
        result = _run(["optimize", "relu", "--device", "cpu", "--model", "local-model", "--base-url", server.url,
                       "--api-key-env", "LOCAL_KEY", "--rounds", "2", "--sol-target", "0", "--db", db, "--json",
                       "--timing-budget", "0.05"], env)  # the client is the subject, not the timing
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert {"run_id", "status", "best", "llm_calls", "prompt_tokens", "completion_tokens", "cost_usd"} <= set(summary)
    assert summary["llm_calls"] == 3 and summary["prompt_tokens"] == 3 * 120 and summary["best"]["speedup"] > 0
    assert summary["cost_usd"] is None and summary["unpriced_models"] == ["local-model"]  # unknown, never $0
    assert "no price for local-model" in result.stderr
    assert "round 1/2" in result.stderr and "round 2/2" in result.stderr  # progress on stderr
    assert all(r["authorization"] == "Bearer local-secret" for r in server.requests)
    verified = _run(["eval", "relu", summary["best"]["path"], "--device", "cpu", "--no-store", "--no-envelope",
                     "--timing-budget", "0.05"], env)
    assert verified.returncode == 0, verified.stdout
