"""report.md of an optimize run, from its RunResult: a row per round and slot (repairs named), the reasons kept on
one table line, why it stopped and its best kernel."""

from __future__ import annotations

from agent.outcomes import Outcome, RunResult
from agent.prompts import Attempt
from reports.optimize_report import optimize_markdown

TOTALS = {"llm_calls": 3, "prompt_tokens": 100, "completion_tokens": 20, "cost_usd": 0.0123}


def test_rows_stop_reason_and_best() -> None:
    wrong = Outcome(0, 0, Attempt("src", "incorrect", reasons=["[compare] a | b\nwrong"]))
    fixed = Outcome(0, 0, Attempt("src", "accepted", speedup=1.5), repair=1)
    result = RunResult("finished", best=fixed, outcomes=[wrong, fixed], message="budget spent", notes=["a note"])
    text = optimize_markdown("r1", "level1/1_ReLU", "cpu", TOTALS, result)
    assert "run `r1`, status **finished**, device cpu, 3 LLM calls, 120 tokens, $0.0123" in text
    assert "| 1 | 1 | incorrect | - | [compare] a \\| b" in text  # a pipe in a reason stays in its cell
    assert "| 1 | 1 (repair 1) | accepted | 1.500x |" in text
    assert "Stopped: budget spent" in text and "- a note" in text and "Best: round 1, 1.500x" in text


def test_a_run_without_an_accepted_kernel_says_so() -> None:
    result = RunResult("no_kernel", best=None, outcomes=[Outcome(1, 0, Attempt("", "llm_error"))])
    text = optimize_markdown("r2", "p", "cpu", TOTALS, result)
    assert "| 2 | 1 | llm_error | - |  |" in text and text.endswith("No candidate was accepted.\n")


def test_an_unpriced_model_costs_unknown_never_nothing() -> None:
    result = RunResult("finished", best=None, outcomes=[])
    text = optimize_markdown("r3", "p", "cpu", {**TOTALS, "cost_usd": 0.0, "unpriced_models": ["my-model"]}, result)
    assert "120 tokens, cost unknown (no price for my-model)" in text and "$0" not in text
    assert "tokens, cost unknown\n" in optimize_markdown("r4", "p", "cpu", {**TOTALS, "cost_usd": None}, result)
