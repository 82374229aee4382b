"""`kernelwright runs ...` and `kernelwright report`: what is in the store, as rows a table or JSON can show."""

from __future__ import annotations

from typing import Any

from harness.records import Unjudged, Verdict
from kernelbench.problem import problem_label
from kernelwright.eval_service import UsageError
from store import open_store
from store.browse import (best_for_problem, get_run_row, list_runs, run_coder_calls, run_costs, run_evaluations,
                          run_judge_calls)
from reports.metrics import by_level
from reports.speedups import faster
from sweeps.sweep import sweep_summary


def runs_list(db_url: str | None) -> list[dict[str, Any]]:
    return list_runs(open_store(db_url, create=False))


def run_details(db_url: str | None, run_id: str) -> dict[str, Any]:
    sessions = open_store(db_url, create=False)
    run = get_run_row(sessions, run_id)
    if run is None:
        raise UsageError(f"no run {run_id!r} in this store (see `kernelwright runs list`)")
    if run["kind"] == "sweep":
        return {**run, **sweep_summary(sessions, run_id)}
    evaluations = run_evaluations(sessions, run_id)
    best = best_evaluation(evaluations)
    attempts = sorted(evaluations + _unevaluated(evaluations, run_coder_calls(sessions, run_id)),
                      key=lambda e: (e["round"] or 0, e["slot"] or 0))
    return {**run, "evaluations": [_shown(e) for e in attempts],
            "best": None if best is None else {"verdict": Verdict.ACCEPTED.value, "speedup": best["speedup"],
                                               "speedup_ci": best["speedup_ci"],
                                               "speedup_significant": best["speedup_significant"],
                                               "candidate_id": best["candidate_id"], "later_check": best["later_check"]},
            "speedup_found": speedup_found(best),
            "shrunk": next((e["shrunk"] for e in evaluations if e["shrunk"]), None),
            "judge": _judge_advice(run_judge_calls(sessions, run_id)), "costs": run_costs(sessions, run_id),
            "metrics": by_level(_best_per_problem(evaluations).values())}


def _shown(evaluation: dict[str, Any]) -> dict[str, Any]:
    """An evaluation row as tables and reports show it: without its source, a build's reason opening with its
    first compiler error at the candidate's line (the raw log is the record's)."""
    from harness.feedback.failure_digest import headline

    row = {k: v for k, v in evaluation.items() if k != "source"}
    if row.get("reason") and evaluation.get("source") and row.get("verdict") == Verdict.COMPILE_ERROR:
        row["reason"] = headline(row["reason"], evaluation["source"], 300)
    return row


def _judge_advice(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per round the judge advised: its diagnosis and change, or why there was none (a retry that parsed wins)."""
    from agent.parse import ParseError, parse_judge

    advice: dict[int, dict[str, Any]] = {}
    for call in calls:
        if call["error"] or call["reply"] is None:
            advice.setdefault(call["round"], {"round": call["round"], "diagnosis": None, "change": None,
                                              "note": f"the judge call failed: {call['error']}"})
            continue
        try:
            parsed = parse_judge(call["reply"])
        except ParseError as exc:
            advice[call["round"]] = {"round": call["round"], "diagnosis": None, "change": None,
                                     "note": f"the judge's reply could not be parsed: {exc}"}
            continue
        advice[call["round"]] = {"round": call["round"], "diagnosis": parsed.diagnosis, "change": parsed.change,
                                 "note": None}
    return [advice[r] for r in sorted(advice)]


def speedup_found(best: dict[str, Any] | None) -> bool | None:
    """Whether the best accepted evaluation is faster than the reference (None: nothing was accepted): above
    1.0x, and beyond the noise (`speedup_significant`, else its interval clears 1.0). When it is not, the
    reference stays: a kernel no faster than it is no result, whatever its verdict."""
    if best is None or best.get("speedup") is None:
        return None
    return faster(best["speedup"], best.get("speedup_ci"), best.get("speedup_significant"))


def best_evaluation(evaluations: list[dict[str, Any]]) -> dict[str, Any] | None:
    accepted = [e for e in evaluations if e["verdict"] == Verdict.ACCEPTED and e["speedup"]]
    return max(accepted, key=lambda e: e["speedup"]) if accepted else None


NOT_EVALUATED = Unjudged.NOT_EVALUATED


def _unevaluated(evaluations: list[dict[str, Any]], calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Round slots with no evaluation of their own: a failed call, an unparseable reply, or a kernel not yet
    evaluated. A kernel identical to one evaluated earlier is not a row of its own: the evaluation it shares
    lists the rounds that repeated it (`repeated_in`), so every table and chart counts that kernel once."""
    from agent.parse import ParseError, extract_candidate
    from harness.pipeline import candidate_hash

    done = {(e["problem"], e["round"], e["slot"]) for e in evaluations}
    by_hash = {(e["problem"], candidate_hash(e["source"])): e for e in evaluations}
    rows = []
    for call in calls:
        if (call["problem"], call["round"], call["slot"]) in done:
            continue
        row = {"round": call["round"], "slot": call["slot"], "problem": call["problem"], "level": call["level"],
               "shrunk": call["shrunk"], "verdict": Unjudged.LLM_ERROR.value, "speedup": None, "reason": call["error"] or "",
               "candidate_id": None,
               "evaluation_id": None, "device": None}
        if not call["error"]:
            try:
                source = extract_candidate(call["reply"] or "")
            except ParseError as exc:
                row.update(verdict=Unjudged.UNPARSEABLE.value, reason=str(exc))
            else:
                same = by_hash.get((call["problem"], candidate_hash(source)))
                if same is not None:
                    repeats = same.setdefault("repeated_in", [])
                    if call["round"] not in repeats:
                        repeats.append(call["round"])
                    continue
                row.update(verdict=NOT_EVALUATED, reason="the run stopped before this kernel was evaluated")
        rows.append(row)
    return rows


def problem_best(db_url: str | None, name: str) -> list[dict[str, Any]]:
    """The fastest kernels of matching problems, significantly faster ones first (the others read `no speedup
    found`)."""
    rows = best_for_problem(open_store(db_url, create=False), name)
    rows.sort(key=lambda r: not faster(r["speedup"], r["speedup_ci"], r["speedup_significant"]))
    if not rows:
        raise UsageError(f"no accepted kernel of a problem matching {name!r} in this store "
                         "(see `kernelwright runs list`)")
    return rows


def compare_runs(db_url: str | None, first: str, second: str) -> list[dict[str, Any]]:
    """Per problem: each run's verdict and speedup side by side."""
    results = [_by_problem(run_details(db_url, run_id)) for run_id in (first, second)]
    names = list(dict.fromkeys([*results[0], *results[1]]))
    rows = []
    for name in names:
        a, b = (r.get(name, {}) for r in results)
        ratio = (b.get("speedup") / a["speedup"]) if a.get("speedup") and b.get("speedup") else None
        rows.append({"problem": name, "shrunk": a.get("shrunk") or b.get("shrunk"),
                     "a_verdict": a.get("verdict"), "a_speedup": a.get("speedup"), "a_speedup_ci": a.get("speedup_ci"),
                     "a_speedup_significant": a.get("speedup_significant"), "a_later_check": a.get("later_check"),
                     "b_verdict": b.get("verdict"), "b_speedup": b.get("speedup"), "b_speedup_ci": b.get("speedup_ci"),
                     "b_speedup_significant": b.get("speedup_significant"), "b_later_check": b.get("later_check"),
                     "b_over_a": ratio})
    return rows


def _by_problem(details: dict[str, Any]) -> dict[str, dict[str, Any]]:
    if details["kind"] == "sweep":
        return {problem_label(p["name"], p.get("shrunk")): p for p in details["problems"]}
    return {problem_label(name, e.get("shrunk")): e for name, e in _best_per_problem(details["evaluations"]).items()}


def _best_per_problem(evaluations: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """A problem's result is its fastest accepted evaluation, or its first one when none was accepted."""
    best: dict[str, dict[str, Any]] = {}
    for e in evaluations:
        current = best.get(e["problem"])
        better = e["verdict"] == Verdict.ACCEPTED and (current is None or current["verdict"] != Verdict.ACCEPTED
                                                 or (e["speedup"] or 0) > (current["speedup"] or 0))
        if current is None or better:
            best[e["problem"]] = e
    return best


def write_run_report(db_url: str | None, run_id: str, output: str | None = None) -> tuple[str, str]:
    """report.html and summary.md for a run, in its folder in the home (`<home>/<run-id>/`) unless told otherwise."""
    from pathlib import Path

    from harness.paths import home
    from store.browse import run_kernels
    from reports.run_report import write_report

    details = run_details(db_url, run_id)
    folder = Path(output) if output else home() / run_id
    kernels = run_kernels(open_store(db_url, create=False), run_id)
    try:
        html_path, markdown_path = write_report(details, folder, kernels)
    except OSError as exc:
        raise UsageError(f"cannot write the report to {folder}: {exc.strerror or exc}") from None
    return str(html_path), str(markdown_path)
