"""What the run does next with each kind of reply small models actually sent (tests/fixtures/
small-model-replies.jsonl), over the fake OpenAI-compatible endpoint: parroted advice, a reply cut off at the cap,
a lone C++ op, an echo of the prompt, a repair that is the same file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent.config import OptimizeConfig
from agent.run_spec import ModelSpec
from kernelwright.optimize_service import run_optimize
from tests.agent.fake_executor import fake_kernel
from tests.agent.fake_server import ScriptedServer
from tests.agent.recorded import ContentExecutor, reply

FAST = fake_kernel("accepted 1.2", "# a first kernel")
FASTER = fake_kernel("accepted 1.4", "# a second kernel")


def _serve(tmp_path: Path, steps: list[tuple[str, Any]], executor: Any = None,
           **options: Any) -> tuple[dict[str, Any], ScriptedServer]:
    config = OptimizeConfig(device="cpu", **{"rounds": 2, "patience": 3, **options})
    with ScriptedServer(steps) as server:
        summary = run_optimize("relu", config, ModelSpec(model="qwen", base_url=server.url, api_key_env="NONE"),
                               f"sqlite:///{tmp_path / 'recorded.db'}", executor=executor or ContentExecutor(
                                   lambda _source: "runtime_error"))
    return summary, server


def _prompt(server: ScriptedServer, index: int) -> str:
    return server.requests[index]["body"]["messages"][-1]["content"]


def _notes(summary: dict[str, Any]) -> list[str]:
    lines = (Path(summary["folder"]) / "transcript.jsonl").read_text().splitlines()
    return [entry["note"] for entry in map(json.loads, lines) if "note" in entry]


def test_parroted_advice_is_asked_again_then_the_round_runs_without_it(tmp_path: Path) -> None:
    """The 0.5B's two judge answers on relu: valid JSON whose change is its prompt's own sentence."""
    steps = [("ok", f"```python\n{FAST}```"), ("reply", reply("ReLU", "judge", 2)),
             ("reply", reply("ReLU", "judge", 3)), ("ok", f"```python\n{FASTER}```")]
    summary, server = _serve(tmp_path, steps, ContentExecutor(lambda s: "accepted 1.4" if "second" in s else
                                                              "accepted 1.2"))
    assert len(server.requests) == 4
    again = _prompt(server, 2)
    assert "repeats your instructions ('prescribe exactly one change')" in again
    coder = _prompt(server, 3)
    assert "Prescribe exactly one change" not in coder and "Make this change" not in coder
    assert "No reviewer advice this round" in coder
    assert any("the round ran without advice" in note for note in _notes(summary))
    report = (Path(summary["folder"]) / "report.md").read_text()
    assert "advice was not usable, twice" in report and "Prescribe exactly one change" not in report
    assert summary["best"]["speedup"] == 1.4


def test_concrete_advice_reaches_the_coder(tmp_path: Path) -> None:
    """The control: the 0.5B's judge answer on Scale_Tanh_Residual names a change (a wrong one, but concrete)."""
    steps = [("ok", f"```python\n{FAST}```"), ("reply", reply("Scale_Tanh", "judge", 2)),
             ("ok", f"```python\n{FASTER}```")]
    summary, server = _serve(tmp_path, steps, ContentExecutor(lambda s: "accepted 1.2"))
    assert len(server.requests) == 3
    assert "Make this change: The weight parameter should be initialized" in _prompt(server, 2)
    assert not _notes(summary)


def test_the_judge_is_asked_for_one_format_and_the_coder_for_the_file_last(tmp_path: Path) -> None:
    steps = [("ok", f"```python\n{FAST}```"), ("ok", '{"diagnosis": "d", "change": "unroll the loop by 4"}'),
             ("ok", f"```python\n{FASTER}```")]
    _, server = _serve(tmp_path, steps, ContentExecutor(lambda s: "accepted 1.2"))
    judge = _prompt(server, 1)
    assert "```python code block" not in judge and judge.rstrip().endswith("}")
    assert "Answer with JSON only" in judge
    for coder in (_prompt(server, 0), _prompt(server, 2)):
        assert coder.rstrip().endswith("the whole file in one ```python code block.")
