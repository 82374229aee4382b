"""report.md of an optimize run, from its RunResult: a row per round and slot (repairs named), the reasons kept on
one table line, why it stopped and its best kernel."""

from __future__ import annotations

from agent.outcomes import Outcome, RunResult
from agent.prompts import Attempt
from reports.optimize_report import optimize_markdown

TOTALS = {"llm_calls": 3, "prompt_tokens": 100, "completion_tokens": 20, "cost_usd": 0.0123}


def test_rows_stop_reason_and_best() -> None:
    wrong = Outcome(0, 0, Attempt("src", "incorrect", reasons=["[compare] a | b\nwrong"]))
    fixed = Outcome(0, 0, Attempt("src", "accepted", speedup=1.5, speedup_ci=(1.4, 1.6), speedup_significant=True),
                    repair=1)
    result = RunResult("finished", best=fixed, outcomes=[wrong, fixed], message="budget spent", notes=["a note"])
    text = optimize_markdown("r1", "level1/1_ReLU", "cpu", TOTALS, result)
    assert "run `r1`, status **finished**, device cpu, 3 LLM calls, 120 tokens, $0.0123" in text
    assert "| 1 | 1 | incorrect | - | [compare] a \\| b" in text  # a pipe in a reason stays in its cell
    assert "| 1 | 1 (repair 1) | accepted | 1.500x [1.400-1.600] |" in text
    assert "Stopped: budget spent" in text and "- a note" in text and "Best: round 1, 1.500x [1.400-1.600]" in text


def test_a_best_kernel_not_significantly_faster_is_no_speedup() -> None:
    tie = Outcome(0, 0, Attempt("src", "accepted", speedup=1.16, speedup_ci=(0.95, 1.4), speedup_significant=False))
    slow = Outcome(1, 0, Attempt("src2", "accepted", speedup=0.25, speedup_ci=(0.24, 0.26), speedup_significant=True))
    text = optimize_markdown("r1", "p", "cpu", TOTALS, RunResult("finished", best=tie, outcomes=[tie, slow]))
    assert "| 1 | 1 | accepted | 1.160x [0.950-1.400] not significant |" in text
    assert "| 2 | 1 | accepted | 0.250x [0.240-0.260] slower |" in text
    assert "Best: round 1, no speedup found (1.160x [0.950-1.400] not significant)" in text


def test_a_run_without_an_accepted_kernel_says_so() -> None:
    result = RunResult("no_kernel", best=None, outcomes=[Outcome(1, 0, Attempt("", "llm_error"))])
    text = optimize_markdown("r2", "p", "cpu", TOTALS, result)
    assert "| 2 | 1 | llm_error | - |  |" in text and text.endswith("No candidate was accepted.\n")


def test_an_unpriced_model_costs_unknown_never_nothing() -> None:
    result = RunResult("finished", best=None, outcomes=[])
    text = optimize_markdown("r3", "p", "cpu", {**TOTALS, "cost_usd": 0.0, "unpriced_models": ["my-model"]}, result)
    assert "120 tokens, cost unknown (no price for my-model)" in text and "$0" not in text
    assert "tokens, cost unknown\n" in optimize_markdown("r4", "p", "cpu", {**TOTALS, "cost_usd": None}, result)
