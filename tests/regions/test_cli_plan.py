"""`kernelwright optimize-model --plan` at the command line: JSON on stdout, a user's mistake one line and exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

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
