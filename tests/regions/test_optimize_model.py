"""optimize-model end to end on the CPU, offline (the bundled transformer block and the demo's scripted reply):
the region is searched through optimize's entry, composed, judged end to end at every input set by the harness,
and attributed; a rerun resumes (the finished search is not repeated). Slow: a build and several evaluations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.run_spec import Execution, ModelSpec
from kernelwright.model_service import optimize_model
from kernelwright.optimize_service import optimize_config

BLOCK = Path(__file__).parents[2] / "regions" / "examples" / "transformer_block.py"


@pytest.mark.slow
def test_demo_model_end_to_end(tmp_path: Path) -> None:
    config = optimize_config(Execution(device="cpu"), rounds=1, candidates=1, patience=1)
    models = ModelSpec(model="scripted:demo_transformer_block.json")
    messages: list[str] = []
    result = optimize_model(BLOCK, config, models, None, tmp_path, 0.0, 1, False, progress=messages.append,
                            only=["mlp.1"])
    [region] = result["regions"]
    assert region["slug"] == "mlp_1_swiglu" and region["region_speedup"]
    alone = region["measured"]
    assert [s["index"] for s in alone["sets"]] == [0, 1]  # judged at every input set
    assert all(s["verdict"] == "accepted" for s in alone["sets"]), alone
    # the kept decision follows the measurement: kept only where the model with it is significantly faster
    assert region["kept"] == (alone["speedup"] > 1.0 and bool(alone["significant"]))
    assert (tmp_path / "patched.py").is_file() == region["kept"]
    assert (tmp_path / "report.md").is_file() and json.loads((tmp_path / "result.json").read_text())["regions"]
    assert list((tmp_path / "ops" / "mlp_1_swiglu").glob("*/export.json"))  # export-op's package: what ships
    again: list[str] = []
    optimize_model(BLOCK, config, models, None, tmp_path, 0.0, 1, False, progress=again.append, only=["mlp.1"])
    assert any("searched already" in m for m in again)
