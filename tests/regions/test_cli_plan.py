"""`kernelwright optimize-model --plan` at the command line: JSON on stdout, a user's mistake one line and exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

KERNELWRIGHT = str(Path(sys.executable).parent / "kernelwright")
BLOCK = Path(__file__).parents[2] / "regions" / "examples" / "transformer_block.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    return subprocess.run([KERNELWRIGHT, *args], capture_output=True, text=True, timeout=600, env=env)


def test_plan_json_and_a_bad_file(tmp_path: Path) -> None:
    done = _run("optimize-model", str(BLOCK), "--plan", "--device", "cpu", "--out", str(tmp_path), "--json")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["regions"] and all(Path(r["problem"]).is_file() for r in plan["regions"])
    bad = tmp_path / "bad.py"
    bad.write_text("def get_inputs():\n    return []\n")
    done = _run("optimize-model", str(bad), "--plan", "--device", "cpu", "--out", str(tmp_path / "b"))
    assert done.returncode == 2 and "Traceback" not in done.stderr and "class Model" in done.stderr


def test_eval_whole_model_judges_as_optimize_model_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """`kernelwright eval MODEL patched.py --whole-model` (the command the report prints) is judged by the policy
    optimize-model used: the kernels' share floor lowered and nothing else loosened."""
    from typer.testing import CliRunner

    import kernelwright.eval_service as eval_service
    from kernelwright.cli import app
    from kernelwright.eval_service import eval_policy

    whole = eval_policy("default", True, timing_budget_s=None)
    assert whole.min_kernel_share == 0.0 and whole.require_custom_kernel and whole.process_pairs >= 6
    assert eval_policy("default").min_kernel_share == 0.05  # without the flag, a kernel's own floor
    seen = []
    monkeypatch.setattr(eval_service, "judge", lambda *args, **kwargs: seen.append(args[4]) or (_ for _ in ()).throw(
        SystemExit(0)))
    CliRunner().invoke(app, ["eval", str(BLOCK), str(BLOCK), "--device", "cpu", "--whole-model"])
    assert seen and seen[0].min_kernel_share == 0.0 and seen[0].require_custom_kernel
