"""What the run does next with each kind of reply small models actually sent (tests/fixtures/
small-model-replies.jsonl), over the fake OpenAI-compatible endpoint: parroted advice, a reply cut off at the cap,
a lone C++ op, an echo of the prompt, a repair that is the same file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy import select

from agent.config import OptimizeConfig
from agent.run_spec import ModelSpec
from kernelwright.optimize_service import run_optimize
from store import EvaluationRow, open_store
from tests.agent.fake_executor import fake_kernel
from tests.agent.fake_server import ScriptedServer
from tests.agent.recorded import ContentExecutor, reply

FAST = fake_kernel("accepted 1.2", "# a first kernel")
FASTER = fake_kernel("accepted 1.4", "# a second kernel")


def _serve(tmp_path: Path, steps: list[tuple[str, Any]], executor: Any = None, said: list[str] | None = None,
           model: dict[str, Any] | None = None, **options: Any) -> tuple[dict[str, Any], ScriptedServer]:
    config = OptimizeConfig(device="cpu", **{"rounds": 2, "patience": 3, **options})
    with ScriptedServer(steps) as server:
        spec = ModelSpec(model="qwen", base_url=server.url, api_key_env="NONE", **(model or {}))
        summary = run_optimize("relu", config, spec, f"sqlite:///{tmp_path / 'recorded.db'}",
                               executor=executor or ContentExecutor(lambda _source: "runtime_error"),
                               progress=(said if said is not None else []).append)
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


def test_a_reply_cut_off_at_the_cap_is_asked_for_the_file_alone(tmp_path: Path) -> None:
    """The 0.5B on relu: a copy of the contract's example, then a second block cut off at 1024 tokens."""
    steps = [("reply", reply("ReLU", "coder", 1)), ("ok", f"Here it is:\n```python\n{FAST}```")]
    summary, server = _serve(tmp_path, steps, ContentExecutor(lambda s: "accepted 1.2"), rounds=1)
    assert len(server.requests) == 2
    assert _prompt(server, 1).startswith("Your reply was cut off at 1024 tokens")
    assert summary["best"]["speedup"] == 1.2 and "a first kernel" in Path(summary["best"]["path"]).read_text()
    entries = [json.loads(line) for line in (Path(summary["folder"]) / "transcript.jsonl").read_text().splitlines()]
    calls = [e for e in entries if "purpose" in e and "reply" in e]
    assert [(c["purpose"], c["finish_reason"], c["truncated"]) for c in calls] == [
        ("coder", "length", True), ("coder+", "stop", False)]
    assert all(c["latency_s"] is not None for c in calls)


def test_a_cut_off_reply_whose_re_ask_fails_too_keeps_its_complete_file(tmp_path: Path) -> None:
    steps = [("reply", reply("ReLU", "coder", 1)), ("reply", {"content": "I cannot.", "finish_reason": "stop"})]
    executor = ContentExecutor(lambda s: "accepted 1.0")
    summary, server = _serve(tmp_path, steps, executor, rounds=1)
    assert len(server.requests) == 2 and len(executor.submitted) == 1
    assert "relu_forward" in executor.submitted[0].source  # the complete block the cut-off reply held
    # ... which is the contract's ReLU example, copied: named so in its verdict's notes, never the run's kernel
    assert summary["best"] is None
    with open_store(f"sqlite:///{tmp_path / 'recorded.db'}")() as session:
        [reasons] = [row.reasons for row in session.scalars(select(EvaluationRow))]
    assert any(r.startswith("[example] this kernel is the contract's worked example (ReLU)") for r in reasons)


def test_a_lone_cpp_op_is_wrapped_and_evaluated_without_a_re_ask(tmp_path: Path) -> None:
    """The 1.5B on relu: a correct stable-ABI op in a ```cpp block, no Python file, no ModelNew."""
    executor = ContentExecutor(lambda s: "accepted 1.1")
    summary, server = _serve(tmp_path, [("reply", reply("ReLU", "coder", 0, "1.5B"))], executor, rounds=1)
    assert len(server.requests) == 1 and len(executor.submitted) == 1
    wrapped = executor.submitted[0].source
    assert "class ModelNew(nn.Module)" in wrapped and "torch.ops.kw_relu.kw_relu(x)" in wrapped
    assert summary["best"]["speedup"] == 1.1
    assert any("the harness wrote the ModelNew" in note for note in _notes(summary))


def test_an_echo_of_the_prompt_is_asked_again(tmp_path: Path) -> None:
    """The 0.5B's round-2 reply on relu: the end of its prompt, no code."""
    echo = reply("ReLU", "coder", 2)
    steps = [("reply", echo), ("ok", f"```python\n{FAST}```")]
    summary, server = _serve(tmp_path, steps, ContentExecutor(lambda s: "accepted 1.2"), rounds=1)
    assert len(server.requests) == 2 and "Reply with the whole file" in _prompt(server, 1)
    assert summary["best"]["speedup"] == 1.2


def test_an_echo_is_named_as_one() -> None:
    from agent.replies import read_reply
    from kernelbench.bundled import find_bundled

    echo = reply("ReLU", "coder", 2)["content"]
    reading = read_reply(echo, "stop", 270, find_bundled("relu"), "cpu", prompt=f"Optimize this.\n\n{echo}\n\nReply.")
    assert reading.source is None and reading.reask.startswith("Your reply repeated the end of the prompt")


def test_a_repair_that_sends_the_same_file_back_is_told_so_once(tmp_path: Path) -> None:
    """The 0.5B on Scale_Tanh_Residual: cut off after a copy of the weighted-sum example, then the same file as
    its fix."""
    same = reply("Scale_Tanh", "repair1", 1)
    fixed = fake_kernel("accepted 1.3", "# scale tanh fixed")
    steps = [("reply", reply("Scale_Tanh", "coder", 1)), ("reply", same), ("reply", same),
             ("ok", f"```python\n{fixed}```")]
    executor = ContentExecutor(lambda s: "accepted 1.3" if "fixed" in s else "runtime_error")
    summary, server = _serve(tmp_path, steps, executor, rounds=1, repair_attempts=1)
    assert len(server.requests) == 4
    assert _prompt(server, 1).startswith("Your reply was cut off at 1024 tokens")
    assert _prompt(server, 3).startswith("This is the same file you sent before; it failed with:")
    assert len(executor.submitted) == 2 and summary["best"]["speedup"] == 1.3


def test_the_time_limit_stops_a_call_in_flight_and_the_run_says_its_cost_first(tmp_path: Path) -> None:
    """A local model slower than the run's time limit: its call is cut at the limit, not retried into the busy
    server, and the run ends `time_limit` (not `failed`)."""
    said: list[str] = []
    summary, server = _serve(tmp_path, [("sleep", 8.0), ("ok", "never asked")], said=said, time_limit_s=1.5,
                             model={"llm_timeout": 600.0, "reply_tokens": 700})
    assert summary["seconds"]["wall"] < 8.0 and len(server.requests) == 1  # it did not wait for the reply
    assert summary["status"] == "time_limit"
    assert server.requests[0]["body"]["max_completion_tokens"] == 700
    estimate = next(line for line in said if line.startswith("prompts: about"))
    assert "tokens per coder call" in estimate and "capped at 700 tokens" in estimate and "600 s" in estimate


def test_example_copies_are_named_and_honest_kernels_are_not() -> None:
    from agent.contract import example_copy
    from agent.parse import extract_candidate
    from agent.wrapper import cpp_op, wrap_op
    from kernelbench.bundled import find_bundled

    assert example_copy(extract_candidate(reply("ReLU", "coder", 1)["content"])) == "ReLU"
    assert example_copy(extract_candidate(reply("Scale_Tanh", "repair1", 1)["content"])) == \
        "a weighted sum over one dimension"
    wrapped = wrap_op(find_bundled("relu"), cpp_op(reply("ReLU", "coder", 0, "1.5B")["content"]), "cpu")
    assert example_copy(wrapped) is None  # the 1.5B's own op, though written after the example's
    bundled = Path(__file__).resolve().parents[2] / "kernelbench" / "bundled" / "candidates"
    assert [f.name for f in sorted(bundled.rglob("*.py")) if example_copy(f.read_text())] == []


def test_every_recorded_reply_that_holds_a_kernel_yields_one_to_evaluate() -> None:
    """Of the 7 recorded coder replies, 5 hold a kernel (3 of them a copy of the contract's example) and all 5 now
    give one to evaluate (before: 3, the lone C++ op was discarded); the 2 echoes hold none and are re-asked."""
    from agent.replies import read_reply
    from kernelbench.bundled import find_bundled
    from tests.agent.recorded import recorded

    yielded, reasked = [], []
    for entry in [r for r in recorded() if r["purpose"] != "judge"]:
        problem = find_bundled(entry["problem"].split("/")[-1])
        reading = read_reply(entry["reply"], entry["finish_reason"], entry["completion_tokens"], problem, "cpu",
                             prompt="")
        (yielded if (reading.source or reading.fallback) else reasked).append(entry)
        assert reading.source or reading.reask  # never a silent loss
    assert len(yielded) == 5 and len(reasked) == 2
    assert all(e["reply"].startswith("<evaluation-output>") for e in reasked)


def test_the_kernel_only_contract_asks_for_the_op_and_the_harness_writes_the_file(tmp_path: Path) -> None:
    executor = ContentExecutor(lambda s: "accepted 1.1")
    summary, server = _serve(tmp_path, [("reply", reply("ReLU", "coder", 0, "1.5B"))], executor, rounds=1,
                             contract="kernel")
    prompt = _prompt(server, 0)
    assert "Write only the C++ op" in prompt and "Name each argument after one of these values: Tensor x" in prompt
    assert prompt.rstrip().endswith("in one ```cpp code block.") and "class ModelNew(nn.Module)` taking" not in prompt
    assert "torch.ops.kw_relu.kw_relu(x)" in executor.submitted[0].source and summary["best"]["speedup"] == 1.1


def test_two_replies_in_a_row_without_a_file_switch_to_the_kernel_only_contract(tmp_path: Path) -> None:
    echo = reply("ReLU", "coder", 2)
    steps = [("reply", echo)] * 4 + [("reply", reply("ReLU", "coder", 0, "1.5B"))]
    summary, server = _serve(tmp_path, steps, ContentExecutor(lambda s: "accepted 1.1"), rounds=3)
    assert len(server.requests) == 5
    assert "Write only the C++ op" not in _prompt(server, 2) and "Write only the C++ op" in _prompt(server, 4)
    assert any("kernel-only contract" in note for note in _notes(summary))
    assert summary["best"]["speedup"] == 1.1
