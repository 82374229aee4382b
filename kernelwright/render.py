"""What the commands print: tables or JSON on stdout, notes on stderr."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Callable

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harness.records import Evaluation
from harness.feedback.failure_digest import digest_reason, headline
from kernelbench.problem import Problem, problem_label
from kernelwright.cli_boundary import note, stderr
from reports.metrics import FAST_P
from reports.run_report import NO_SPEEDUP, clip
from reports.speedups import result_cell, speedup_cell, speedup_origin

if TYPE_CHECKING:
    from kernelwright.eval_service import EvalOutcome


def emit(rows: Any, json_output: bool, table: Callable[[Any], Table]) -> None:
    """`rows` as JSON, or as the table `table` makes of them."""
    if json_output:
        print(json.dumps(rows), flush=True)
    else:
        print_table(table(rows))


def print_evaluation(outcome: EvalOutcome, json_output: bool, self_check: bool) -> None:
    from kernelwright.eval_service import self_check_reasons, self_check_verdict

    if outcome.shrink and outcome.shrink.changes:
        note(f"size reduction: {outcome.problem.shrunk}")
    if json_output:
        data = outcome.evaluation.summary()
        data.update(evaluation_id=outcome.evaluation_id, problem=outcome.problem.key, shrunk=outcome.problem.shrunk)
        if self_check:
            data["self_check"] = self_check_verdict(outcome.evaluation)
        print(json.dumps(data), flush=True)
        return
    evaluation = outcome.evaluation
    if self_check:
        evaluation = evaluation.model_copy(update={"reasons": self_check_reasons(evaluation.reasons)})
    print_table(evaluation_table(outcome.problem, evaluation, outcome.source))
    if self_check:
        print(self_check_verdict(outcome.evaluation), flush=True)


def print_export(result: Any) -> None:
    """`export-op`: where the package went and what its own test said, or why nothing was exported."""
    evaluation, exported = result.evaluation, result.exported
    if exported is None:
        note(f"not exported: {evaluation.verdict.value}: {'; '.join(evaluation.reasons[:3])}")
        return
    from kernelwright.export_op import bucket_line

    note(f"wrote {exported.op_name} to {exported.out_dir / exported.package} ({len(exported.envelope)} verified "
         f"size(s), {len(exported.buckets)} verified bucket(s); see {exported.readme} and export.json)")
    for entry in exported.envelope:
        shapes = ", ".join("x".join(map(str, shape)) or "scalar" for shape, *_ in entry["inputs"])
        sizes = " ".join(f"{k}={v}" for k, v in (entry["sizes"] or {}).items()) or "the problem's own"
        note(f"  kernel at {sizes} (inputs {shapes})")
    for skipped in exported.not_routed:
        note(f"  reference at {skipped['sizes']}: verified, but {skipped['why']}")
    for bucket in exported.buckets + exported.unverified_buckets:
        note(f"  {bucket_line(bucket)}")
    if exported.buckets:
        note("  inside a bucket only the sizes sampled are proven; the rest is inferred by sampling (see the README)")
    if result.test_output:
        note(result.test_output.rstrip())


def print_problems(problems: list[Problem], json_output: bool) -> None:
    rows = [{"key": p.key, "name": p.name, "level": p.level, "id": p.problem_id, "path": p.path,
             "fingerprint": p.fingerprint} for p in problems]
    emit(rows, json_output, lambda _rows: problems_table(problems))


def print_shrink(rows: list[dict[str, Any]], json_output: bool, written_to: Any) -> None:
    emit(rows, json_output, shrink_table)
    if written_to:
        note(f"wrote {sum('written' in r for r in rows)} problem(s) to {written_to}")


def print_gate(results: list[Any], json_output: bool) -> None:
    """The gate's table or JSON, then one FAILED line on stderr per kernel that no longer holds."""
    failed = [r for r in results if not r.ok]
    if json_output:
        print(json.dumps({"passed": not failed, "results": [r.as_json() for r in results]}), flush=True)
    else:
        print_table(gate_table(results))
    for result in failed:
        stderr.print(f"[bold red]FAILED[/] {escape(result.problem)} ({escape(str(result.kernel))}): {result.verdict}: "
                     f"{escape(digest_reason(result.reasons[0], result.source)) if result.reasons else ''}")


def print_optimize(summary: dict[str, Any], json_output: bool) -> None:
    emit(summary, json_output, optimize_table)
    if summary.get("message"):
        note(f"run {summary['run_id']} failed: {summary['message']}")


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f} ms"


def evaluation_table(problem: Problem, evaluation: Evaluation, source: str | None = None) -> Table:
    """The verdict, the speedup with its interval and where it comes from, and the reasons, a build's as the
    model reads it: its compiler errors first, at the candidate's lines (the full log stays in the record)."""
    colour = "green" if evaluation.accepted else "red"
    table = Table(title=f"{escape(problem.label)} on {evaluation.device}", show_header=False)
    table.add_row("verdict", f"[bold {colour}]{evaluation.verdict.value}[/]")
    if evaluation.speedup is not None:
        low, high = evaluation.speedup_ci or (evaluation.speedup, evaluation.speedup)
        table.add_row("speedup", f"{evaluation.speedup:.3f}x  (95% CI {low:.3f}-{high:.3f})")
        origin = speedup_origin(evaluation.isolation.get("precision"))
        table.add_row("speedup is the", escape(origin) if origin else "reference's median time over the candidate's")
    table.add_row("reference", _ms(evaluation.ref_ms) + (" (median of all calls)" if evaluation.ref_ms else ""))
    table.add_row("candidate", _ms(evaluation.candidate_ms) + (" (median of all calls)" if evaluation.candidate_ms
                                                               else ""))
    if evaluation.trials:
        passed = sum(t.passed for t in evaluation.trials)
        worst = max((t.max_abs_error or 0.0) for t in evaluation.trials)
        table.add_row("correctness", f"{passed}/{len(evaluation.trials)} trials passed, max abs error {worst:.2e}")
    builds = evaluation.build.get("builds", [])
    if builds:
        table.add_row("builds", ", ".join(build_label(b) for b in builds))
    for build in builds:
        for kernel in build.get("resources", []):
            table.add_row("kernel", f"{kernel['kernel']}: {kernel.get('registers')} registers, "
                                    f"{kernel.get('shared_bytes', 0)} B smem, "
                                    f"{kernel.get('spill_store_bytes', 0)} B spilled")
    table.add_row("network", str(evaluation.isolation.get("network", "-")))
    table.add_row("time", f"{evaluation.phase_seconds.get('total', 0):.1f} s")
    for line in envelope_lines(evaluation.envelope):
        table.add_row("envelope", escape(line))
    for reason in evaluation.reasons:
        table.add_row("reason", escape(digest_reason(reason, source)))
    return table


def envelope_lines(envelope: dict[str, Any] | None) -> list[str]:
    """One line per size checked beside the problem's own: the sizes, the verdict, the speedup where timed."""
    if not envelope:
        return []
    lines = []
    for variant in envelope.get("variants", []):
        sizes = " ".join(f"{k}={v}" for k, v in variant["sizes"].items())
        speed = f", {variant['speedup']:.3f}x" if variant.get("speedup") is not None else ""
        lines.append(f"{variant['label']} ({sizes}): {variant['verdict']}{speed}")
    return lines + [f"not checked: {reason}" for reason in envelope.get("skipped", [])]


def build_label(build: dict[str, Any]) -> str:
    """`cached`, `built in 6.1 s`, or `failed after 1.2 s` (a build that produced no binary was not built)."""
    if build.get("binary") is None:
        return f"failed after {build.get('seconds', 0):.1f} s"
    return "cached" if build.get("cache_hit") else f"built in {build.get('seconds', 0):.1f} s"


def problems_table(problems: list[Problem]) -> Table:
    table = Table(title=f"{len(problems)} problems")
    for column in ("key", "level", "id", "name", "fingerprint"):
        table.add_column(column)
    for p in problems:
        table.add_row(p.key, str(p.level or "-"), str(p.problem_id if p.problem_id is not None else "-"), p.name,
                      p.fingerprint[:12])
    return table


def shrink_table(rows: list[dict[str, Any]]) -> Table:
    table = Table(title="size reduction")
    written = any("written" in row for row in rows)
    for column in ("problem", "status", "before", "after", "changes") + (("written",) if written else ()):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(row["problem"], row["status"], row.get("before", "-"), row.get("after", "-"),
                      _text(row.get("changes") or row.get("reason")),
                      *((_text(row.get("written")),) if written else ()))
    return table


def check_table(rows: list[dict[str, Any]]) -> Table:
    table = Table(title="canaries (trivial outputs that should fail)")
    for column in ("problem", "status", "reason"):
        table.add_column(column, overflow="fold")
    colours = {"ok": "green", "hardened": "yellow", "degenerate": "red", "error": "red"}
    for row in rows:
        table.add_row(row["problem"], f"[{colours[row['status']]}]{row['status']}[/]", escape(str(row.get("reason", ""))))
    return table


def gate_table(results: list[Any]) -> Table:
    table = Table(title=f"gate: {sum(r.ok for r in results)}/{len(results)} kernels hold")
    for column in ("problem", "kernel", "verdict", "speedup (95% interval)", "stored", "reason"):
        table.add_column(column, overflow="fold")
    for r in results:
        colour = "green" if r.ok else "red"
        table.add_row(escape(problem_label(r.problem, r.shrunk)), escape(r.kernel), f"[{colour}]{r.verdict}[/]",
                      escape(speedup_cell(r.speedup, r.interval, r.significant)), _speed(r.stored_speedup),
                      "" if r.ok else escape(clip(headline((r.reasons or [""])[0], r.source), 300)))
    return table


def optimize_table(summary: dict[str, Any]) -> Table:
    table = Table(title=f"optimize {escape(problem_label(summary['problem'], summary.get('shrunk')))}",
                  show_header=False)
    best = summary["best"]
    table.add_row("run", summary["run_id"])
    table.add_row("status", summary["status"] + (f": {escape(summary['message'])}" if summary.get("message") else ""))
    table.add_row("best", best_label(best, summary.get("speedup_found")))
    table.add_row("LLM", f"{summary['llm_calls']} calls, {summary['prompt_tokens']} prompt + "
                         f"{summary['completion_tokens']} completion tokens, {cost_label(summary)}")
    for line in envelope_lines(summary.get("envelope")):
        table.add_row("best's envelope", escape(line))
    if summary.get("envelope_finding"):
        table.add_row("[bold yellow]envelope[/]", escape(summary["envelope_finding"]))
    if summary.get("op"):
        table.add_row("drop-in op", escape(f"{summary['op']} (test it: {summary['op_test']})"))
        for line in summary.get("op_buckets") or []:
            table.add_row("op's bucket", escape(line))
    elif summary.get("op_error"):
        table.add_row("drop-in op", escape(f"not exported: {summary['op_error']}"))
    table.add_row("time", ", ".join(f"{k} {v:.1f} s" for k, v in summary["seconds"].items()))
    table.add_row("report", f"{summary['folder']}/report.md")
    return table


def best_label(best: dict[str, Any] | None, found: bool | None) -> str:
    """The best kernel with its interval, or why there is none worth using: not accepted, or not significantly
    faster than the reference."""
    if best is None:
        return "none accepted"
    where = f"round {best['round']}, {escape(best['path'])}" if best.get("path") else ""
    measured = escape(speedup_cell(best["speedup"], best.get("speedup_ci"), best.get("speedup_significant")))
    if not found:
        return f"[bold yellow]{NO_SPEEDUP}[/] (best accepted kernel: {measured}, {where})"
    return f"[bold green]{measured}[/] ({where})"


def _result(row: dict[str, Any], prefix: str = "") -> str:
    """A run's own best result: its speedup with its interval, or `no speedup found (...)`."""
    return escape(result_cell(row.get(f"{prefix}speedup"), row.get(f"{prefix}speedup_ci"),
                              row.get(f"{prefix}speedup_significant")))


def _cell(row: dict[str, Any], prefix: str = "") -> str:
    return escape(speedup_cell(row.get(f"{prefix}speedup"), row.get(f"{prefix}speedup_ci"),
                               row.get(f"{prefix}speedup_significant")))


def later_label(check: dict[str, Any] | None) -> str:
    """A later re-measurement of the kernel (gate, re-judgement), shown beside the run's result, never as it."""
    if not check:
        return "-"
    if check["verdict"] != "accepted":
        return f"{check['verdict']} (evaluation {check['evaluation_id']})"
    return f"{_cell(check)} (evaluation {check['evaluation_id']})"


def cost_label(summary: dict[str, Any]) -> str:
    """`$0.0123`, or `cost unknown (no price for MODEL)`: a model without a price never reads as free."""
    if summary.get("cost_usd") is None:
        return f"cost unknown (no price for {', '.join(summary.get('unpriced_models') or ['a model'])})"
    return f"${summary['cost_usd']:.4f}"


def _speed(value: Any) -> str:
    return "-" if not value else f"{value:.3f}x"


def _text(value: Any) -> str:
    """A cell: '-' for nothing, `name n, ...` for counts, and never rich markup (`[check]` tags stay visible)."""
    if value is None or value == "" or value == {}:
        return "-"
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    return escape(str(value))


def _columns(title: str, columns: list[str], rows: list[list[str]]) -> Table:
    table = Table(title=title)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*row)
    return table


def metrics_table(metrics: dict[str, Any]) -> Table:
    return _columns("metrics", ["level", "problems", "correct"] + [f"fast_{p:g}" for p in FAST_P]
                    + ["geomean (correct)", "failures"],
                    [[level, str(m["problems"]), f"{m['correctness_rate']:.0%}"]
                     + [f"{m['fast_p'][f'{p:g}']:.0%}" for p in FAST_P]
                     + [_speed(m["geomean_speedup_correct"]), _text(m["failures"])]
                     for level, m in metrics.items()])


def sweep_table(summary: dict[str, Any]) -> Table:
    print_table(metrics_table(summary["metrics"]))
    if "metrics_vs_compile" in summary:
        table = metrics_table(summary["metrics_vs_compile"])
        table.title = "metrics against torch.compile"
        print_table(table)
    table = _columns(f"sweep {summary['run_id']} ({summary['status']})", ["problem", "status", "verdict", "speedup",
                                                                           "detail"],
                     [[escape(problem_label(p["name"], p.get("shrunk"))), p["status"], _text(p["verdict"]),
                       _cell(p), _text(clip(p["detail"] or "", 120))] for p in summary["problems"]])
    if summary.get("llm_calls"):  # the calls of its problems' optimize runs
        table.caption = (f"{summary['llm_calls']} LLM calls, {summary['prompt_tokens']} prompt + "
                         f"{summary['completion_tokens']} completion tokens, {cost_label(summary)}")
    return table


def runs_table(rows: list[dict[str, Any]]) -> Table:
    later = any(r.get("later_check") for r in rows)
    return _columns("runs", ["run", "kind", "model", "status", "problems", "best (95% interval)"]
                    + (["later check"] if later else []) + ["LLM calls", "cost"],
                    [[r["run_id"], r["kind"], str(r["model"] or "-"), r["status"],
                      escape(problem_label(str(r["problem"] or r["problems"]), r.get("shrunk"))),
                      _result(r, "best_"), *([later_label(r.get("later_check"))] if later else []),
                      str(r["llm_calls"]), cost_label(r)] for r in rows])


def run_table(details: dict[str, Any]) -> Table:
    if details["kind"] == "sweep":
        return sweep_table(details)
    print_table(metrics_table(details["metrics"]))
    later = any(e.get("later_check") for e in details["evaluations"])
    table = _columns(f"{details['kind']} {details['run_id']} ({details['status']})",
                     ["round", "problem", "verdict", "speedup (95% interval)"] + (["later check"] if later else [])
                     + ["first reason"],
                     [[round_label(e), escape(problem_label(e["problem"], e.get("shrunk"))), e["verdict"],
                       _cell(e), *([later_label(e.get("later_check"))] if later else []),
                       _text(clip(e["reason"], 120))] for e in details["evaluations"]])
    if details.get("speedup_found") is False:
        table.caption = f"{NO_SPEEDUP} (best accepted kernel {_cell(details['best'])})"
    return table


def round_label(row: dict[str, Any]) -> str:
    """`2`, or `2 (again in 3, 4)` for a kernel the model wrote again in later rounds (evaluated once)."""
    again = row.get("repeated_in") or []
    first = str(row["round"] or "-")
    return f"{first} (again in {', '.join(map(str, again))})" if again else first


def best_table(rows: list[dict[str, Any]]) -> Table:
    return _columns("best kernels", ["problem", "speedup (95% interval)", "slowest", "runs", "later check",
                                     "device", "run", "candidate", "kernel"],
                    [[escape(problem_label(r["problem"], r.get("shrunk"))), _result(r), _speed(r["slowest"]),
                      str(r["evaluations"]), later_label(r.get("later_check")), r["device"],
                      _text(r["run_id"]), _text(r["candidate_id"]), r["kernel"]] for r in rows])


def compare_table(rows: list[dict[str, Any]]) -> Table:
    return _columns("comparison (each run's own measurements)",
                    ["problem", "A", "A speedup (95% interval)", "B", "B speedup (95% interval)", "B / A"],
                    [[escape(r["problem"]), _text(r["a_verdict"]), _cell(r, "a_"), _text(r["b_verdict"]),
                      _cell(r, "b_"), "-" if r["b_over_a"] is None else f"{r['b_over_a']:.2f}"] for r in rows])


def print_table(table: Table) -> None:
    Console(width=max(Console().width, 120)).print(table)


def print_rescore(report: Any, json_output: bool) -> None:
    """`rescore`'s table (each kernel re-judged, before and after) or JSON, then what changed by check on stderr."""
    if json_output:
        print(json.dumps(report.as_json()), flush=True)
    else:
        print_table(rescore_table(report))
    if report.skipped_current:
        note(f"{report.skipped_current} selected kernels were already judged by {report.checks_version} on "
             f"{report.device}: skipped (--again re-judges them)")
    changed = ", ".join(f"{check}: {count}" for check, count in report.by_check.items())
    note(f"{sum(r.changed for r in report.results)} of {len(report.results)} verdicts changed"
         + (f" (by check: {changed})" if changed else ""))


def rescore_table(report: Any) -> Table:
    table = Table(title=f"rescore under {report.checks_version} on {report.device}")
    for column in ("problem", "kernel", "before", "after", "decided by", "reason"):
        table.add_column(column, overflow="fold")
    for r in report.results:
        colour = "green" if r.after == "accepted" else "red"
        before = f"{r.before} {_speed(r.before_speedup)} ({r.before_version})"
        after = f"[{colour}]{r.after}[/] " + interval_label(r.after_speedup, r.after_interval)
        table.add_row(escape(problem_label(r.problem, r.shrunk)), f"candidate {r.candidate_id}", escape(before),
                      after + (" [bold](changed)[/]" if r.changed else ""), escape(r.decided_by or ""),
                      "" if r.after == "accepted" else escape(clip((r.reasons or [""])[0], 300)))
    return table


def print_model_plan(plan: Any, json_output: bool) -> None:
    """`optimize-model --plan`: the regions extracted and what was not, with each one's share of the time."""
    from dataclasses import asdict

    if json_output:
        print(json.dumps(asdict(plan)), flush=True)
        return
    table = Table(title=f"{escape(plan.model)} on {plan.device}: {plan.model_ms:.3f} ms per forward (weighted over "
                        f"{len(plan.per_set)} input set{'s' * (len(plan.per_set) != 1)})")
    for column in ("region", "modules", "share", "ms", "status"):
        table.add_column(column)
    for region in plan.regions:
        table.add_row(escape(region["slug"]), escape(" -> ".join(region["paths"])), f"{region['share']:.1%}",
                      f"{region['ms']:.3f}", "extracted: " + escape(region["fidelity"]))
    for skipped in plan.unhandled + plan.cold:
        table.add_row("-", escape(skipped["path"]), f"{skipped['share']:.1%}", "-", escape(skipped["reason"]))
    print_table(table)
    note(f"plan: {plan.folder}/plan.md")


def print_model_result(result: dict[str, Any], json_output: bool) -> None:
    """`optimize-model`: per region, predicted beside measured and whether it was kept; then the whole model."""
    if json_output:
        print(json.dumps(result, default=str), flush=True)
        return
    if result.get("message"):
        note(result["message"])
    table = Table(title=f"{escape(result['model'])}: regions end to end")
    for column in ("region", "share", "region speedup", "model: predicted", "model: measured", "kept", "why"):
        table.add_column(column, overflow="fold")
    for r in result.get("regions", []):
        measured = r["measured"] or {}
        table.add_row(escape(r["slug"]), f"{r['share']:.1%}", _speed(r["region_speedup"]), f"{r['predicted']:.3f}x",
                      _with_ci(measured.get("speedup"), measured.get("speedup_ci")),
                      "yes" if r["kept"] else "no", escape(" ".join(r["notes"])))
    print_table(table)
    final = result.get("end_to_end")
    if final:
        note(f"patched model ({', '.join(result['kept'])}): {_with_ci(final['speedup'], final['speedup_ci'])} "
             f"measured over the served mix, {result['predicted']:.3f}x predicted; {result['patched']}")
    if result.get("folder"):
        note(f"report: {result['folder']}/report.md")


def _with_ci(speedup: float | None, interval: Any) -> str:
    return _speed(speedup) + (f" [{interval[0]:.3f}-{interval[1]:.3f}]" if interval else "")
