"""report.md of an optimize run: one row per round and slot, why the run stopped, and its best kernel. Written into
the run's folder when the run finishes (report.html and summary.md come later, from the store: run_report.py)."""

from __future__ import annotations

from typing import Any

from harness.feedback.failure_digest import headline
from reports.speedups import result_cell, speedup_cell


def optimize_markdown(run_id: str, problem_key: str, device: str, totals: dict[str, Any], result: Any) -> str:
    """`result`: the run's agent.outcomes.RunResult (read, not imported: the agent imports this room);
    `totals`: its LLM calls, tokens and cost as the store sums them, with `unpriced_models` where a model has no
    price (then the cost is unknown, never $0)."""
    lines = [f"# optimize {problem_key}", "", f"run `{run_id}`, status **{result.status}**, "
             f"device {device}, {totals['llm_calls']} LLM calls, "
             f"{totals['prompt_tokens'] + totals['completion_tokens']} tokens, {_cost(totals)}", "",
             "| round | candidate | verdict | speedup | first reason |", "|---|---|---|---|---|"]
    for o in result.outcomes:
        speed = speedup_cell(o.attempt.speedup, o.attempt.speedup_ci, o.attempt.speedup_significant, 3)
        first = headline(o.attempt.reasons[0], o.attempt.source, 160) if o.attempt.reasons else ""
        reason = first.replace("|", "\\|").replace("\n", " ")
        slot = f"{o.slot + 1}" + (f" (repair {o.repair})" if o.repair else "")
        lines.append(f"| {o.round + 1} | {slot} | {o.attempt.verdict} | {speed} | {reason} |")
    if getattr(result, "stopped_by", ""):
        lines += ["", f"Stopped by {result.stopped_by}."]
    if result.message:
        lines += ["", f"Stopped: {result.message}"]
    if result.notes:
        lines += ["", "Notes:", *(f"- {note}" for note in result.notes)]
    if result.best:
        best = result.best.attempt
        lines += ["", f"Best: round {result.best.round + 1}, "
                      f"{result_cell(best.speedup, best.speedup_ci, best.speedup_significant, 3)}, saved as `best.py`."]
        if _floor_fraction(best.roofline):
            lines.append(f"Speed of light: the best kernel runs at {_floor_fraction(best.roofline)}.")
    else:
        lines += ["", "No candidate was accepted."]
    return "\n".join(lines) + "\n"


def _floor_fraction(roofline: dict[str, Any]) -> str:
    """The kernel's fraction of the device's roofline floor, in words ("" where none was computed)."""
    fraction = (roofline or {}).get("candidate_fraction")
    if not isinstance(fraction, (int, float)) or "floor_ms" not in roofline:
        return ""
    return (f"{fraction:.0%} of the device's floor ({roofline['floor_ms']:.4g} ms, "
            f"{roofline.get('bound', '?')}-bound on {roofline.get('spec', 'this device')})")


def _cost(totals: dict[str, Any]) -> str:
    if totals.get("unpriced_models"):
        return f"cost unknown (no price for {', '.join(totals['unpriced_models'])})"
    return "cost unknown" if totals.get("cost_usd") is None else f"${totals['cost_usd']:.4f}"
