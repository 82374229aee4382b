"""report.md of `optimize-model`: time per region before and after, predicted gain beside measured, and why each
region was kept or dropped."""

from __future__ import annotations

from typing import Any


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}x"


def _ci(interval: Any) -> str:
    return "" if not interval else f" [{interval[0]:.3f}-{interval[1]:.3f}]"


def result_markdown(result: dict[str, Any], plan: Any) -> str:
    lines = [f"# optimize-model: {result['model']} on {result['device']}", ""]
    final = result.get("end_to_end")
    if final:
        lines += [f"End to end ({', '.join(result['kept'])}): measured **{_x(final['speedup'])}**"
                  f"{_ci(final['speedup_ci'])} over the served mix, predicted {_x(result['predicted'])} "
                  f"(each kept region's speedup by its share).", "",
                  f"Verify it yourself: `{result['eval_command']}` (input set by input set).", ""]
    else:
        lines += ["No region kept: the model is unchanged (no patched.py).", ""]
    shares = {r["slug"]: r for r in plan.regions}
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
