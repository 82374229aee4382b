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
    no_code = {"purpose": "coder", "content": "no code today"}  # asked again once in its round: no code again
    replies = [coder_reply(fast), judge_reply(), no_code, no_code, judge_reply(), coder_reply(faster), judge_reply(),
               coder_reply(fast)]
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


def _sweep_details(problems: list[dict], **run: object) -> dict:
    from reports.metrics import by_level

    return {"run_id": "sweep-1", "kind": "sweep", "status": "finished", "created_at": "2026-11-25T20:00:00",
            "config": {"sweep": {"device": "cpu", "device_name": "x86_64, 2 cores"}}, "llm_calls": 0,
            "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0, "problems": problems,
            "metrics": by_level(problems), **run}


def _problem(name: str, child: str | None, cost: float | None, **fields: object) -> dict:
    return {"name": name, "level": 1, "shrunk": None, "status": "done", "verdict": "accepted", "speedup": 2.0,
            "ref_ms": 1.0, "candidate_ms": 0.5, "speedup_ci": [1.8, 2.2], "speedup_significant": True,
            "wall_s": 3.0, "cost_usd": cost, "detail": f"/runs/{child}" if child else "", "child_run_id": child,
            **fields}


def test_a_model_sweep_shows_its_runs_totals_and_names_them(tmp_path: Path) -> None:
    """The totals are the store's (the sweep's optimize runs' calls, store.runs.run_spend), not summed here."""
    from reports.run_report import write_report

    details = _sweep_details([_problem("level1/1_ReLU", "run-a", 0.0125), _problem("level1/2_GELU", "run-b", 0.5)],
                             llm_calls=6, prompt_tokens=900, completion_tokens=100, cost_usd=0.5125)
    page_path, summary_path = write_report(details, tmp_path, {})
    page, summary = page_path.read_text(), summary_path.read_text()
    for text in (page, summary):
        assert "6 LLM calls, 1000 tokens, $0.5125 in its 2 optimize runs" in text and "run-a" in text
        assert "run-b" in text
        assert "1.0000 ms" in text and "0.5000 ms" in text and "1.800-2.200x" in text
    assert "<th>optimize run</th>" in page and "| problem | optimize run |" in summary
    assert "kernelwright report RUN" in page  # where each run's judge and cost per role are
    assert "device cpu (x86_64, 2 cores)" in page
    assert summary.endswith("|\n")

    unpriced = _sweep_details([_problem("level1/1_ReLU", "run-a", None), _problem("level1/2_GELU", "run-b", 0.5)],
                              llm_calls=6, cost_usd=None, unpriced_models=["my-vllm-model"])
    page_path, summary_path = write_report(unpriced, tmp_path / "u", {})
    for text in (page_path.read_text(), summary_path.read_text()):
        assert "cost unknown" in text and "$0.5000" not in text  # never a partial sum passed off as the cost


def test_a_solutions_sweep_says_it_called_no_model(tmp_path: Path) -> None:
    from reports.run_report import write_report

    page_path, summary_path = write_report(_sweep_details([_problem("level1/1_ReLU", None, None)]), tmp_path, {})
    page, summary = page_path.read_text(), summary_path.read_text()
    assert "no LLM calls" in page and "status finished, no LLM calls" in summary
    assert "<th>round</th>" in page and "kernelwright report RUN" not in page


def test_an_unpriced_optimize_run_shows_its_cost_as_unknown_and_the_judge_in_the_summary(tmp_path: Path) -> None:
    from reports.run_report import write_report

    evaluation = {"problem": "ReLU", "level": 1, "shrunk": None, "verdict": "accepted", "speedup": 1.5,
                  "reason": "", "round": 1, "candidate_id": 1, "device": "cpu", "ref_ms": 1.5, "candidate_ms": 1.0,
                  "speedup_ci": [1.4, 1.6]}
    details = {"run_id": "opt-1", "kind": "optimize", "status": "finished", "llm_calls": 3, "prompt_tokens": 900,
               "completion_tokens": 100, "cost_usd": None, "unpriced_models": ["my-model"],
               "evaluations": [evaluation], "best": {"speedup": 1.5}, "speedup_found": True,
               "judge": [{"round": 2, "diagnosis": "strided loads", "change": "swap the loops", "note": None},
                         {"round": 3, "diagnosis": None, "change": None,
                          "note": "the judge's reply could not be parsed: no JSON"}],
               "costs": {"coder": {"calls": 2, "prompt_tokens": 600, "completion_tokens": 80, "cost_usd": 0.0},
                         "judge": {"calls": 1, "prompt_tokens": 300, "completion_tokens": 20, "cost_usd": 0.0}},
               "metrics": {}}
    page_path, summary_path = write_report(details, tmp_path, {})
    page, summary = page_path.read_text(), summary_path.read_text()
    for text in (page, summary):
        assert "3 LLM calls, 1000 tokens, cost unknown (no price for my-model)" in text and "$0.0000" not in text
    assert page.count("<td>unknown</td>") == 2  # per model role too
    assert "- round 2: strided loads Change: swap the loops" in summary
    assert "- round 3: the judge's reply could not be parsed: no JSON" in summary
    assert summary.endswith("\n") and not summary.endswith("\n\n")


def test_clipping_respects_line_breaks_and_a_cut_that_falls_between_words() -> None:
    from reports.run_report import clip

    lines = "error: expected ';'\nbefore 'return'\nin function relu_forward"
    clipped = clip(lines, 30)
    assert clipped == "error: expected ';'\nbefore…"
    assert clip("alpha beta gamma", 11) == "alpha beta…"  # 'beta' ends right at the cut: kept whole
    assert clip("x" * 50, 10) == "x" * 9 + "…"  # one word longer than the room: cut inside it, the only way
