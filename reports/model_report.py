"""The report of `optimize-model` (report.md and report.html in the model's folder): time per region before and
after, predicted gain beside measured, and why each region was kept or dropped. Plain records in (the result and
the plan's regions, as written to result.json and plan.json), text out."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}x"


def _ci(interval: Any) -> str:
    return "" if not interval else f" [{interval[0]:.3f}-{interval[1]:.3f}]"


def result_markdown(result: dict[str, Any], plan_regions: list[dict[str, Any]]) -> str:
    lines = [f"# optimize-model: {result['model']} on {result['device']}", ""]
    final = result.get("end_to_end")
    if final:
        lines += [f"End to end ({', '.join(result['kept'])}): measured **{_x(final['speedup'])}**"
                  f"{_ci(final['speedup_ci'])} over the served mix, predicted {_x(result['predicted'])} "
                  f"(each kept region's speedup by its share).", "",
                  f"Verify it yourself: `{result['eval_command']}` (input set by input set).", ""]
    else:
        lines += ["No region kept: the model is unchanged (no patched.py).", ""]
    shares = {r["slug"]: r for r in plan_regions}
    lines += ["## Regions: time before and after", "",
              "| region | share | ms before | region speedup | ms after (predicted) | model alone: predicted | "
              "measured | kept |", "|---|---|---|---|---|---|---|---|"]
    for r in result["regions"]:
        before = shares[r["slug"]]["ms"]
        after = before / r["region_speedup"] if r["region_speedup"] else before
        measured = r["measured"] or {}
        lines.append(f"| {r['slug']} | {r['share']:.1%} | {before:.3f} | {_x(r['region_speedup'])} | {after:.3f} | "
                     f"{_x(r['predicted'])} | {_x(measured.get('speedup'))}{_ci(measured.get('speedup_ci'))} | "
                     f"{'yes' if r['kept'] else 'no'} |")
    lines += [""]
    for r in result["regions"]:
        for note in r["notes"]:
            lines.append(f"- {r['slug']}: {note}")
    if final:
        lines += ["", "## Input sets", "", "| set | weight | verdict | speedup | reference ms | patched ms |",
                  "|---|---|---|---|---|---|"]
        for s in final["sets"]:
            lines.append(f"| {s['index'] + 1} | {s['weight']:.2f} | {s['verdict']} | {_x(s['speedup'])}"
                         f"{_ci(s['speedup_ci'])} | {s['ref_ms'] or '-'} | {s['candidate_ms'] or '-'} |")
    for row in (result.get("compile") or {}).get("sets", []):
        lines.append(f"- against torch.compile at set {row['set']}: "
                     + (f"patched/compiled {row['patched_over_compile']:.3f}x (compile alone "
                        f"{row['compile_speedup']:.3f}x over eager)" if row["patched_over_compile"] else
                        f"not timed ({row['error']})"))
    return "\n".join(lines) + "\n"


_STYLE = ("body{font-family:sans-serif;margin:2em;max-width:70em}table{border-collapse:collapse}"
          "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}.kept{color:#1a7f37}.dropped{color:#b42318}")
_BAR_WIDTH = 420


def _bars(rows: list[tuple[str, float, float, float | None]]) -> str:
    """Per region, three bars on one scale: ms before (the profile), after as its problem's speedup predicts, and
    after as the model measured with it alone (the model's saved ms taken from the region's)."""
    scale = max([max(b, a, m or 0.0) for _, b, a, m in rows] + [1e-9])
    height = 22 + 54 * len(rows)
    parts = [f'<svg width="{_BAR_WIDTH + 260}" height="{height}" role="img" aria-label="time per region">',
             '<text x="0" y="12" font-size="11">ms per forward: before (grey), after predicted (blue), after '
             'measured end to end (green)</text>']
    for index, (name, before, after, measured) in enumerate(rows):
        y = 22 + 54 * index
        parts.append(f'<text x="0" y="{y + 12}" font-size="11">{html.escape(name)}</text>')
        for offset, value, colour in ((0, before, "#999"), (14, after, "#3b6fd4"), (28, measured, "#2e9e4f")):
            if value is None:
                continue
            width = max(1.0, _BAR_WIDTH * value / scale)
            parts.append(f'<rect x="200" y="{y + offset}" width="{width:.1f}" height="12" fill="{colour}"/>'
                         f'<text x="{205 + width:.1f}" y="{y + offset + 10}" font-size="10">{value:.3f}</text>')
    return "".join(parts) + "</svg>"


def result_html(result: dict[str, Any], plan_regions: list[dict[str, Any]]) -> str:
    shares = {r["slug"]: r for r in plan_regions}
    rows, bars = [], []
    for r in result["regions"]:
        before = shares[r["slug"]]["ms"]
        after = before / r["region_speedup"] if r["region_speedup"] else before
        measured_ms = None if r.get("saved_ms") is None else max(0.0, before - r["saved_ms"])
        bars.append((r["slug"], before, after, measured_ms))
        measured = r["measured"] or {}
        rows.append(f"<tr><td>{html.escape(r['slug'])}</td><td>{r['share']:.1%}</td><td>{before:.3f}</td>"
                    f"<td>{_x(r['region_speedup'])}</td><td>{after:.3f}</td><td>{_x(r['predicted'])}</td>"
                    f"<td>{_x(measured.get('speedup'))}{_ci(measured.get('speedup_ci'))}</td>"
                    f"<td class=\"{'kept' if r['kept'] else 'dropped'}\">{'kept' if r['kept'] else 'dropped'}</td>"
                    f"<td>{html.escape(' '.join(r['notes']))}</td></tr>")
    final = result.get("end_to_end")
    headline = (f"End to end ({html.escape(', '.join(result['kept']))}): measured <b>{_x(final['speedup'])}"
                f"{_ci(final['speedup_ci'])}</b>, predicted {_x(result['predicted'])}" if final else
                "No region kept: the model is unchanged.")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>optimize-model "
            f"{html.escape(result['model'])}</title><style>{_STYLE}</style></head><body>"
            f"<h1>optimize-model: {html.escape(result['model'])} on {html.escape(result['device'])}</h1>"
            f"<p>{headline}</p><h2>Time per region, before and after</h2>{_bars(bars)}"
            "<table><tr><th>region</th><th>share</th><th>ms before</th><th>region speedup</th>"
            "<th>ms after (predicted)</th><th>model: predicted</th><th>model: measured</th><th></th><th>why</th></tr>"
            f"{''.join(rows)}</table></body></html>")


def write_model_report(folder: Path, result: dict[str, Any], plan_regions: list[dict[str, Any]]) -> Path:
    """report.md and report.html in `folder`; returns the HTML's path."""
    (folder / "report.md").write_text(result_markdown(result, plan_regions))
    path = folder / "report.html"
    path.write_text(result_html(result, plan_regions))
    return path
