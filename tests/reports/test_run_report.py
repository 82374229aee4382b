"""report.html and `runs show` for an optimize run (scripted replies and evaluations, no builds): every round
report.md lists, escaped SVG text, a fast_p curve that stays on its chart, axis labels, device and dates."""

from __future__ import annotations

import html
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
    # round 4 wrote round 1's kernel again: evaluated once, listed once, with the round that repeated it
    assert [(e["round"], e["verdict"]) for e in details["evaluations"]] == [
        (1, "accepted"), (2, "unparseable"), (3, "accepted")]
    assert details["evaluations"][0]["repeated_in"] == [4] and details["speedup_found"] is True
    html_path, markdown_path = write_run_report(db, summary["run_id"], str(tmp_path / "report"))
    page = Path(html_path).read_text()
    assert "1 (again in 4)" in page and "| 1 (again in 4) | accepted | 1.500x | " in Path(markdown_path).read_text()
    assert "<th>reference</th>" in page and "1.0000 ms" in page and "0.6667 ms" in page  # timings, per kernel
    assert "<h2>judge</h2>" in page and "tile it" in page and "<h2>cost</h2>" in page and "<td>judge</td>" in page
    scales = (("speedup distribution", ">1</text>"), ("fast_p", ">100%</text>"), ("progress", ">1.50x</text>"))
    for chart, top in scales:
        svg = re.search(rf'aria-label="{chart}".*?</svg>', page).group(0)
        assert 'text-anchor="end"' in svg and top in svg  # a y-axis scale
    histogram = re.search(r'aria-label="speedup distribution".*?</svg>', page).group(0)
    assert sorted(int(n) for n in re.findall(r'text-anchor="middle">(\d+)</text>', histogram)) == [0] * 6 + [1, 1]
    assert "&lt;0.25" in page and ">&lt;" not in page.replace(">&lt;0.25", "")
    assert "device cpu" in page and "report written" in page
    for label in ("speedup over the reference", "fraction of problems", "round", "best speedup"):
        assert label in page
    curve = re.search(r'aria-label="fast_p".*?<polyline points="([^"]+)"', page).group(1)
    ys = [float(point.split(",")[1]) for point in curve.split()]
    assert min(ys) >= 30 and max(ys) <= 180  # one problem, three accepted evaluations: the fraction stays <= 1


def _optimize(tmp_path: Path, problem: str, kernels: list[str], shrink: bool = False) -> tuple[str, str]:
    replies = [r for kernel in kernels for r in (coder_reply(kernel), judge_reply())]
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"replies": replies}))
    db = f"sqlite:///{tmp_path / 'r.db'}"
    summary = run_optimize(problem, OptimizeConfig(device="cpu", rounds=len(kernels), patience=9),
                           ModelSpec(model=f"scripted:{script}"), db, executor=ScriptedExecutor(), shrink=shrink)
    return db, summary["run_id"]


def test_a_best_kernel_slower_than_the_reference_is_no_speedup(tmp_path: Path) -> None:
    db, run_id = _optimize(tmp_path, "relu", [fake_kernel("accepted 0.204"), fake_kernel("accepted 0.5")])
    details = run_details(db, run_id)
    assert details["speedup_found"] is False and details["best"]["speedup"] == 0.5
    html_path, markdown_path = write_run_report(db, run_id, str(tmp_path / "report"))
    for text in (Path(html_path).read_text(), Path(markdown_path).read_text()):
        assert "no speedup found; the reference stays (best accepted kernel 0.500x)" in text


def test_results_on_a_shrunk_problem_say_so_with_the_sizes(tmp_path: Path) -> None:
    from kernelwright.runs_service import compare_runs, problem_best
    from tests.conftest import HUGE_ELEMENTWISE

    problem = tmp_path / "level1" / "19_ReLU.py"
    problem.parent.mkdir()
    problem.write_text(HUGE_ELEMENTWISE)
    db, run_id = _optimize(tmp_path, str(problem), [fake_kernel("accepted 2.0")], shrink=True)
    details = run_details(db, run_id)
    note = details["shrunk"]
    assert note.startswith("batch_size 4096->") and "dim 393216->" in note
    assert [e["shrunk"] for e in details["evaluations"]] == [note]
    assert [r["shrunk"] for r in problem_best(db, "ReLU")] == [note]
    assert compare_runs(db, run_id, run_id)[0]["problem"] == f"ReLU (shrunk: {note})"
    html_path, markdown_path = write_run_report(db, run_id, str(tmp_path / "report"))
    page, summary = Path(html_path).read_text(), Path(markdown_path).read_text()
    assert html.escape(f"ReLU (shrunk: {note})") in page and f"ReLU (shrunk: {note})" in summary
    assert "rescaled to the CPU budget" in page and "rescaled to the CPU budget" in summary
    from kernelwright.export_service import export_dataset

    assert export_dataset("rl", tmp_path / "rl.jsonl", db, None, 0.0) == 1  # training data says so too
    assert json.loads((tmp_path / "rl.jsonl").read_text())["shrunk"] == note


def test_long_reasons_are_clipped_at_a_word_boundary() -> None:
    from reports.run_report import clip

    text = "the output differs from the reference at 4096 positions, the largest error 3.2e-01 at index 17"
    assert clip(text, 200) == text
    clipped = clip(text, 40)
    assert clipped.endswith("…") and len(clipped) <= 40 and text.startswith(clipped[:-1])
    assert text[len(clipped) - 1] == " "  # cut between words


def test_a_speedup_inside_the_noise_is_no_speedup() -> None:
    from kernelwright.runs_service import speedup_found

    assert speedup_found(None) is None
    assert speedup_found({"speedup": 1.05, "speedup_significant": False}) is False  # interval covers 1.0
    assert speedup_found({"speedup": 0.9, "speedup_significant": True}) is False  # significantly slower
    assert speedup_found({"speedup": 1.5, "speedup_significant": True}) is True
    assert speedup_found({"speedup": 1.5, "speedup_significant": None}) is True  # measured before the A/A floor
