"""report.html and `runs show` for an optimize run (scripted replies and evaluations, no builds): every round
report.md lists, escaped SVG text, a fast_p curve that stays on its chart, axis labels, device and dates."""

from __future__ import annotations

import json
import re
from pathlib import Path

from agent.config import OptimizeConfig
from agent.run_spec import ModelSpec
from kernelwright.optimize_service import run_optimize
from kernelwright.runs_service import run_details, write_run_report
from tests.agent.fake_executor import ScriptedExecutor, coder_reply, fake_kernel, judge_reply


def test_optimize_report_shows_every_round_and_sane_charts(tmp_path: Path) -> None:
    fast, faster = fake_kernel("accepted 1.5"), fake_kernel("accepted 3.0")
    replies = [coder_reply(fast), judge_reply(), {"purpose": "coder", "content": "no code today"}, judge_reply(),
               coder_reply(faster), judge_reply(), coder_reply(fast)]
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"replies": replies}))
    db = f"sqlite:///{tmp_path / 'r.db'}"
    summary = run_optimize("relu", OptimizeConfig(device="cpu", rounds=4, patience=9),
                           ModelSpec(model=f"scripted:{script}"), db, executor=ScriptedExecutor())
    details = run_details(db, summary["run_id"])
    assert [(e["round"], e["verdict"]) for e in details["evaluations"]] == [
        (1, "accepted"), (2, "unparseable"), (3, "accepted"), (4, "accepted")]
    assert "the same kernel as round 1" in details["evaluations"][3]["reason"]
    html_path, _ = write_run_report(db, summary["run_id"], str(tmp_path / "report"))
    page = Path(html_path).read_text()
    assert "&lt;0.25" in page and ">&lt;" not in page.replace(">&lt;0.25", "")
    assert "device cpu" in page and "report written" in page
    for label in ("speedup over the reference", "fraction of problems", "round", "best speedup"):
        assert label in page
    curve = re.search(r'aria-label="fast_p".*?<polyline points="([^"]+)"', page).group(1)
    ys = [float(point.split(",")[1]) for point in curve.split()]
    assert min(ys) >= 30 and max(ys) <= 180  # one problem, three accepted evaluations: the fraction stays <= 1
