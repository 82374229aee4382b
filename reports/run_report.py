"""`kernelwright report RUN`: a self-contained HTML page (inline SVG plots, no scripts, no network) and a
Markdown summary, written next to the run's artifacts with every kernel linked."""

from __future__ import annotations

import html
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from harness.records import Verdict
from kernelbench.problem import problem_label
from reports.metrics import FAST_P, fast_p_fraction
from reports.speedups import SPEEDUP_NOTE

# tables never wider than the window (1280 px and less): cells wrap, anywhere if a word is longer than the column
_STYLE = ("body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1400px}"
          "table{border-collapse:collapse;margin:1em 0;max-width:100%;table-layout:auto}"
          "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;overflow-wrap:anywhere;word-break:break-word}"
          "td:last-child{min-width:12em}th{background:#f3f3f3}.accepted{color:#176f2c}"
          ".failed{color:#b3261e}svg{border:1px solid #ddd;margin:0.5em 1em 0.5em 0}")


NO_SPEEDUP = "no speedup found; the reference stays"


def _rows(details: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per evaluated kernel (a kernel the model repeated is one row that names the repeating rounds)."""
    if details["kind"] == "sweep":
        return [{"problem": problem_label(p["name"], p.get("shrunk")), "name": p["name"], "level": p["level"],
                 "verdict": p["verdict"], "speedup": p["speedup"], "detail": _sweep_detail(p), "round": None,
                 "child_run_id": p.get("child_run_id"), "cost_usd": p.get("cost_usd"), **_timing(p)}
                for p in details["problems"]]
    return [{"problem": problem_label(e["problem"], e.get("shrunk")), "name": e["problem"], "level": e["level"],
             "verdict": e["verdict"], "speedup": e["speedup"], "detail": e["reason"], "round": e["round"], **_timing(e),
             "repeated_in": e.get("repeated_in") or [], "candidate_id": e["candidate_id"], "device": e.get("device")}
            for e in details["evaluations"]]


def _timing(row: dict[str, Any]) -> dict[str, Any]:
    return {"speedup_ci": row.get("speedup_ci"), "ref_ms": row.get("ref_ms"), "candidate_ms": row.get("candidate_ms")}


def _sweep_detail(problem: dict[str, Any]) -> str:
    slower = problem["verdict"] == Verdict.ACCEPTED and problem["speedup"] is not None and (
        problem["speedup"] <= 1.0 or problem.get("speedup_significant") is False)
    return (f"{NO_SPEEDUP}. " if slower else "") + (problem.get("detail") or "")


def _round(row: dict[str, Any]) -> str:
    """The round of an optimize run's kernel, or the optimize run behind a sweep's problem."""
    if row.get("child_run_id"):
        return str(row["child_run_id"])
    again = row.get("repeated_in") or []
    first = str(row["round"] or "")
    return f"{first} (again in {', '.join(map(str, again))})" if again else first


def _outcome(details: dict[str, Any]) -> str:
    """What the run leaves the user, said first: nothing faster than the reference is no result."""
    if details.get("speedup_found") is False:
        return f"{NO_SPEEDUP} (best accepted kernel {speedup_label(details['best']['speedup'])})"
    return ""


def _shrunk_note(rows: list[dict[str, Any]]) -> str:
    if not any(r["problem"] != r["name"] for r in rows):
        return ""
    return ("shrunk: problems marked (shrunk: ...) were rescaled to the CPU budget; their results are on those "
            "sizes, not the benchmark's own")


def _y_ticks(ticks: list[tuple[float, str]], x: float) -> str:
    """Labels of the y axis: (y coordinate, text), right-aligned at `x`, with faint grid lines."""
    return "".join(f'<text x="{x:.0f}" y="{y + 3:.1f}" font-size="9" text-anchor="end">{html.escape(text)}</text>'
                   f'<line x1="{x + 3:.0f}" y1="{y:.1f}" x2="460" y2="{y:.1f}" stroke="#eee"/>' for y, text in ticks)


def _histogram(speedups: list[float]) -> str:
    edges = [0.25, 0.5, 1.0, 1.5, 2.0, 4.0, 8.0]
    labels = ["<0.25", "0.25-0.5", "0.5-1", "1-1.5", "1.5-2", "2-4", "4-8", ">8"]
    counts = [0] * len(labels)
    for s in speedups:
        counts[sum(s >= e for e in edges)] += 1
    top = max(counts) or 1
    scale = _y_ticks([(170 - 140 * v / top, str(v)) for v in sorted({0, top // 2, top})], 34)
    bars = "".join(f'<rect x="{40 + i * 52}" y="{170 - 140 * c / top:.1f}" width="45" height="{140 * c / top:.1f}" '
                   f'fill="#4a7bd0"/><text x="{62 + i * 52}" y="190" font-size="10" text-anchor="middle">'
                   f'{html.escape(labels[i])}'
                   f'</text><text x="{62 + i * 52}" y="{165 - 140 * c / top:.1f}" font-size="10" '
                   f'text-anchor="middle">{c}</text>' for i, c in enumerate(counts))
    return (f'<svg role="img" aria-label="speedup distribution" width="470" height="210">'
            f'<text x="10" y="15" font-size="12">speedup distribution (accepted kernels, each once)</text>{scale}'
            f'{bars}{_axes("speedup over the reference", "kernels")}</svg>')


def _axes(x_label: str, y_label: str) -> str:
    return (f'<text x="235" y="206" font-size="10" text-anchor="middle">{html.escape(x_label)}</text>'
            f'<text x="10" y="110" font-size="10" transform="rotate(-90 10 110)" text-anchor="middle">'
            f'{html.escape(y_label)}</text>')


def _fast_p_curve(best: list[tuple[float, float]], total: int) -> str:
    """`best`: each problem's best accepted (speedup, interval's lower end), one per problem (so the fraction never
    exceeds 1); the curve counts as the fast_p table above it does."""
    ps = [i / 10 for i in range(0, 31)]
    points = " ".join(f"{45 + p * 128:.1f},{180 - 150 * fast_p_fraction(best, total, p):.1f}" for p in ps)
    ticks = "".join(f'<text x="{45 + p * 128:.0f}" y="195" font-size="10">{p:g}</text>' for p in (0, 1, 2, 3))
    scale = _y_ticks([(180 - 150 * f, f"{f:.0%}") for f in (0, 0.5, 1)], 40)
    return (f'<svg role="img" aria-label="fast_p" width="470" height="210"><text x="10" y="15" font-size="12">'
            f'fast_p: fraction of all problems correct and faster than p (whole interval)</text>{scale}'
            f'<polyline points="{points}" '
            f'fill="none" stroke="#d0704a" stroke-width="2"/><line x1="45" y1="180" x2="430" y2="180" stroke="#999"/>'
            f'{ticks}{_axes("p (speedup threshold)", "fraction of problems")}</svg>')


def _progress(rows: list[dict[str, Any]]) -> str:
    rounds = sorted({r["round"] for r in rows if r["round"]})
    if not rounds:
        return ""
    best, points = 0.0, []
    for index, round_ in enumerate(rounds):
        best = max([best] + [r["speedup"] for r in rows if r["round"] == round_ and r["verdict"] == Verdict.ACCEPTED
                             and r["speedup"]])
        points.append((index, best))
    top = max(b for _, b in points) or 1.0
    line = " ".join(f"{55 + i * 380 / max(1, len(rounds) - 1):.1f},{180 - 150 * b / top:.1f}" for i, b in points)
    scale = _y_ticks([(180 - 150 * v / top, f"{v:.2f}x") for v in (0.0, top / 2, top)], 50)
    return (f'<svg role="img" aria-label="progress" width="470" height="210"><text x="10" y="15" font-size="12">'
            f'best speedup so far, by round (top {top:.2f}x)</text>{scale}<polyline points="{line}" fill="none" '
            f'stroke="#2c8a4a" stroke-width="2"/>{_round_ticks(rounds)}{_axes("round", "best speedup")}</svg>')


def _round_ticks(rounds: list[int]) -> str:
    step = 380 / max(1, len(rounds) - 1)
    return "".join(f'<text x="{55 + i * step:.0f}" y="195" font-size="10">{r}</text>' for i, r in enumerate(rounds))


def _metrics_table(metrics: dict[str, Any]) -> str:
    head = "".join(f"<th>fast_{p:g}</th>" for p in FAST_P)
    body = ""
    for level, m in metrics.items():
        geo = m["geomean_speedup_correct"]
        body += (f"<tr><td>{level}</td><td>{m['problems']}</td><td>{m['correctness_rate']:.0%}</td>"
                 + "".join(f"<td>{m['fast_p'][f'{p:g}']:.0%}</td>" for p in FAST_P)
                 + f"<td>{'-' if geo is None else f'{geo:.2f}x'}</td><td>{html.escape(_counts(m['failures']))}</td></tr>")
    return (f"<table><tr><th>level</th><th>problems</th><th>correct</th>{head}<th>geomean (correct)</th>"
            f"<th>failures</th></tr>{body}</table><p>{html.escape(NOISE_NOTE)}</p>")


NOISE_NOTE = ("fast_p counts a kernel faster than p only where its whole 95% interval (widened by the A/A noise "
              "floor) is above p; the geomean takes a speedup whose interval holds 1.0 as 1.0.")


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "-"


def write_report(details: dict[str, Any], folder: Path, kernels: dict[str, str]) -> tuple[Path, Path]:
    """`kernels`: label -> kernel source, written under `folder/kernels/` and linked from the table."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernels").mkdir(exist_ok=True)
    links = {}
    for label, source in kernels.items():
        name = "".join(c if c.isalnum() or c in "-_" else "_" for c in label) + ".py"
        (folder / "kernels" / name).write_text(source)
        links[label] = f"kernels/{name}"
    rows = _rows(details)
    speedups = [r["speedup"] for r in rows if r["verdict"] == Verdict.ACCEPTED and r["speedup"]]
    best: dict[str, tuple[float, float]] = {}  # per problem: the best accepted (speedup, interval's lower end)
    for r in rows:
        if r["verdict"] == Verdict.ACCEPTED and r["speedup"] and r["speedup"] > best.get(r["problem"], (0.0, 0.0))[0]:
            best[r["problem"]] = (r["speedup"], (r.get("speedup_ci") or [r["speedup"]])[0])
    total = len({r["problem"] for r in rows})
    table = "".join(
        f"<tr><td>{html.escape(str(r['problem']))}</td><td>{html.escape(_round(r))}</td><td class="
        f"\"{'accepted' if r['verdict'] == Verdict.ACCEPTED else 'failed'}\">{html.escape(str(r['verdict']))}</td>"
        f"<td>{speedup_label(r['speedup'])}</td><td>{interval_label(r.get('speedup_ci'))}</td>"
        f"<td>{ms_label(r.get('ref_ms'))}</td><td>{ms_label(r.get('candidate_ms'))}</td>"
        f"<td>{_link(links, r)}</td><td>{html.escape(clip(str(r['detail']), 300))}</td></tr>" for r in rows)
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>kernelwright {details['run_id']}</title>"
            f"<style>{_STYLE}</style></head><body><h1>{details['kind']} {html.escape(details['run_id'])}</h1>"
            f"<p>status {html.escape(str(details['status']))}, device {html.escape(_device(details, rows))}, "
            f"created {html.escape(str(details.get('created_at', '-')))}, report written "
            f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {html.escape(llm_line(details, rows))}</p>"
            f"{_notes_html(details, rows)}{_metrics_table(details['metrics'])}"
            f"<div>{_histogram(speedups)}{_fast_p_curve(list(best.values()), total)}{_progress(rows)}</div>"
            f"<table><tr><th>problem</th><th>{_round_heading(rows)}</th><th>verdict</th><th>speedup</th>"
            f"<th>95% interval</th><th>reference</th><th>candidate</th><th>kernel</th><th>first reason</th></tr>"
            f"{table}</table><p>{html.escape(SPEEDUP_NOTE)}</p>"
            f"{_judge_html(details.get('judge') or [])}"
            f"{_costs_html(details.get('costs') or {}, not details.get('unpriced_models'))}"
            f"{_child_runs_html(rows)}</body></html>")
    html_path = folder / "report.html"
    html_path.write_text(page)
    markdown_path = folder / "summary.md"
    markdown_path.write_text(_markdown(details, rows))
    return html_path, markdown_path


def _round_heading(rows: list[dict[str, Any]]) -> str:
    return "optimize run" if any(r.get("child_run_id") for r in rows) else "round"


def llm_line(details: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    """The LLM calls, tokens and cost of the run as the store sums them (store.runs.run_spend): a sweep's are
    those of the optimize runs it started, which it names."""
    calls = details.get("llm_calls") or 0
    if not calls:
        return "no LLM calls"
    tokens = (details.get("prompt_tokens") or 0) + (details.get("completion_tokens") or 0)
    children = sum(1 for r in rows if r.get("child_run_id"))
    within = f" in its {children} optimize run{'s' if children > 1 else ''}" if children else ""
    return f"{calls} LLM calls, {tokens} tokens, {_cost(details)}{within}"


def _cost(details: dict[str, Any]) -> str:
    if details.get("unpriced_models"):
        return f"cost unknown (no price for {', '.join(details['unpriced_models'])})"
    if details.get("cost_usd") is None:
        return "cost unknown"
    return f"${details['cost_usd']:.4f}"


def _child_runs_html(rows: list[dict[str, Any]]) -> str:
    """A sweep's judge advice and cost per model role live in its problems' optimize runs: say where."""
    if not any(r.get("child_run_id") for r in rows):
        return ""
    return ("<p>Each problem's rounds, judge diagnoses and cost per model role are in its optimize run's report: "
            "<code>kernelwright report RUN</code> with the run named in the table.</p>")


def _dollars(value: float | None) -> str:
    return "unknown" if value is None else f"${value:.4f}"


def _judge_html(advice: list[dict[str, Any]]) -> str:
    if not advice:
        return ""
    rows = "".join(f"<tr><td>{a['round']}</td><td>{html.escape(a['diagnosis'] or '-')}</td>"
                   f"<td>{html.escape(a['change'] or a['note'] or '-')}</td></tr>" for a in advice)
    return (f"<h2>judge</h2><table><tr><th>advice for round</th><th>diagnosis</th><th>change asked for</th></tr>"
            f"{rows}</table>")


def _costs_html(costs: dict[str, dict[str, Any]], priced: bool) -> str:
    if not costs:
        return ""
    rows = "".join(f"<tr><td>{html.escape(purpose)}</td><td>{c['calls']}</td><td>{c['prompt_tokens']}</td>"
                   f"<td>{c['completion_tokens']}</td><td>{_dollars(c['cost_usd'] if priced else None)}</td></tr>"
                   for purpose, c in costs.items())
    return (f"<h2>cost</h2><table><tr><th>model role</th><th>calls</th><th>prompt tokens</th>"
            f"<th>completion tokens</th><th>dollars</th></tr>{rows}</table>")


def _notes_html(details: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    return "".join(f"<p><strong>{html.escape(note)}</strong></p>" for note in (_outcome(details), _shrunk_note(rows))
                   if note)


def _device(details: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    devices = sorted({str(r["device"]) for r in rows if r.get("device")})
    if devices:
        return ", ".join(devices)
    config = details.get("config")
    sweep = config.get("sweep") if isinstance(config, dict) else None  # a sweep names its device in its spec
    if isinstance(sweep, dict) and sweep.get("device"):
        return f"{sweep['device']} ({sweep['device_name']})" if sweep.get("device_name") else str(sweep["device"])
    return str(details.get("device") or "-")


def _link(links: dict[str, str], row: dict[str, Any]) -> str:
    label = _kernel_label(row)
    return f'<a href="{links[label]}">source</a>' if label in links else ""


def _kernel_label(row: dict[str, Any]) -> str:
    return f"{row['name']}-c{row['candidate_id']}" if row.get("candidate_id") else str(row["name"])


def _markdown(details: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    notes = [note for note in (_outcome(details), _shrunk_note(rows)) if note]
    lines = [f"# {details['kind']} {details['run_id']}", "", f"status {details['status']}, {llm_line(details, rows)}",
             "",
             *(line for note in notes for line in (f"**{note}**", "")),
             "| level | problems | correct | " + " | ".join(f"fast_{p:g}" for p in FAST_P) + " | geomean (correct) |",
             "|---" * (4 + len(FAST_P)) + "|"]
    for level, m in details["metrics"].items():
        geo = m["geomean_speedup_correct"]
        lines.append(f"| {level} | {m['problems']} | {m['correctness_rate']:.0%} | "
                     + " | ".join(f"{m['fast_p'][f'{p:g}']:.0%}" for p in FAST_P)
                     + f" | {'-' if geo is None else f'{geo:.2f}x'} |")
    lines += ["", NOISE_NOTE, "", SPEEDUP_NOTE]
    lines += ["", f"| problem | {_round_heading(rows)} | verdict | speedup | 95% interval | reference | "
                  "candidate |",
              "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['problem']} | {_round(r)} | {r['verdict']} | {speedup_label(r['speedup'])} | "
              f"{interval_label(r.get('speedup_ci'))} | {ms_label(r.get('ref_ms'))} | "
              f"{ms_label(r.get('candidate_ms'))} |"
              for r in rows]
    lines += _judge_markdown(details.get("judge") or [])
    return "\n".join(lines) + "\n"


def _judge_markdown(advice: list[dict[str, Any]]) -> list[str]:
    if not advice:
        return []
    return ["", "Judge, per round it advised:", "",
            *(f"- round {a['round']}: " + (f"{a['diagnosis']} Change: {a['change'] or '-'}" if a["diagnosis"]
                                           else str(a["note"] or a["change"] or "-")) for a in advice)]


def speedup_label(value: float | None) -> str:
    return "-" if not value or not math.isfinite(value) else f"{value:.3f}x"


def interval_label(interval: list[float] | tuple[float, float] | None) -> str:
    return "-" if not interval else f"{interval[0]:.3f}-{interval[1]:.3f}x"


def ms_label(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f} ms"


def clip(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters at a word boundary, with an ellipsis when cut (never mid-word)."""
    if len(text) <= limit:
        return text
    cut = text[:limit - 1]
    if not text[limit - 1].isspace():  # the cut falls inside a word: back to the last whitespace
        space = max(cut.rfind(c) for c in " \n\t")
        cut = cut[:space] if space > limit // 2 else cut  # one word longer than half the room is cut inside
    return cut.rstrip(" \n\t,;:") + "…"
