"""Every printed speedup carries its interval, a kernel not significantly faster is `no speedup found`, and the
run's own result is never replaced by a later re-measurement (gate), which is shown beside it as such."""

from __future__ import annotations

from pathlib import Path

import pytest

from reports.speedups import faster, result_cell, speedup_cell


def test_a_speedup_reads_with_its_interval_and_its_significance() -> None:
    assert speedup_cell(1.32, (1.2, 1.45), True) == "1.32x [1.20-1.45]"
    assert speedup_cell(1.16, (0.95, 1.4), False) == "1.16x [0.95-1.40] not significant"
    assert speedup_cell(0.25, (0.24, 0.26), True) == "0.25x [0.24-0.26] slower"
    assert speedup_cell(1.16, (0.95, 1.4)) == "1.16x [0.95-1.40] not significant"  # judged from the interval
    assert speedup_cell(None, None) == "-"


def test_only_a_significantly_faster_kernel_is_a_result() -> None:
    assert result_cell(1.32, (1.2, 1.45), True) == "1.32x [1.20-1.45]"
    assert result_cell(1.16, (0.95, 1.4), False) == "no speedup found (1.16x [0.95-1.40] not significant)"
    assert result_cell(0.19, (0.18, 0.2), True) == "no speedup found (0.19x [0.18-0.20] slower)"
    assert not faster(1.3, (0.9, 1.6), None) and faster(1.3, (1.1, 1.6), None) and not faster(0.9, None, None)


def _run_with_a_later_gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str, int]:
    from agent.config import OptimizeConfig
    from agent.run_spec import ModelSpec
    from harness.records import Evaluation, Verdict
    from kernelwright.optimize_service import run_optimize
    from store import open_store
    from store.results import accepted_candidates, add_evaluation
    from tests.agent.fake_executor import ScriptedExecutor, coder_reply, fake_kernel
    from tests.agent.fake_server import ScriptedServer

    db = f"sqlite:///{tmp_path / 's.db'}"
    monkeypatch.setenv("LOCAL_KEY", "local-secret")
    reply = coder_reply(fake_kernel("accepted 1.5"))["content"]
    with ScriptedServer([("ok", reply)]) as server:
        models = ModelSpec(model="scripted-model", base_url=server.url, api_key_env="LOCAL_KEY")
        summary = run_optimize("relu", OptimizeConfig(device="cpu", rounds=1), models, db,
                               executor=ScriptedExecutor())
    seconds = summary["seconds"]  # --json's wall is the whole command: the loop and what came after it
    assert seconds["wall"] >= seconds["loop"] + seconds["envelope"] - 0.01 and seconds["envelope"] >= 0
    sessions = open_store(db, create=False)
    (candidate,) = accepted_candidates(sessions, summary["run_id"])
    gate = Evaluation(verdict=Verdict.ACCEPTED, problem_name="ReLU", problem_fingerprint="f",
                      candidate_hash=candidate.source_hash, device="cpu", speedup=1.05, speedup_ci=(0.9, 1.2),
                      speedup_significant=False)
    return db, summary["run_id"], add_evaluation(sessions, candidate.id, gate)


def test_runs_list_best_and_compare_show_the_runs_own_result_and_the_gate_beside_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelwright.render import best_table, compare_table, run_table, runs_table
    from kernelwright.runs_service import compare_runs, problem_best, run_details, runs_list
    from rich.console import Console

    db, run_id, gate_id = _run_with_a_later_gate(tmp_path, monkeypatch)

    def shown(table: object) -> str:
        console = Console(width=250, record=True)
        console.print(table)
        return console.export_text()

    (listed,) = runs_list(db)
    assert listed["best_speedup"] == 1.5 and listed["later_check"]["speedup"] == 1.05
    text = shown(runs_table([listed]))
    assert "1.50x [no interval]" in text and "later check" in text
    assert f"1.05x [0.90-1.20] not significant (evaluation {gate_id})" in text
    details = run_details(db, run_id)
    assert [e["speedup"] for e in details["evaluations"]] == [1.5]  # the gate's is no round of the run
    assert "evaluation" in shown(run_table(details)).split("later check")[1]
    (best,) = problem_best(db, "relu")
    assert best["speedup"] == 1.5 and best["evaluations"] == 1 and best["later_check"]["evaluation_id"] == gate_id
    assert "1.50x [no interval]" in shown(best_table([best]))
    (row,) = compare_runs(db, run_id, run_id)
    assert row["a_speedup"] == row["b_speedup"] == 1.5


def test_a_best_kernel_that_is_not_faster_reads_no_speedup_found() -> None:
    from kernelwright.render import best_label, best_table
    from rich.console import Console

    row = {"problem": "GELU", "speedup": 0.24, "speedup_ci": [0.23, 0.25], "speedup_significant": True,
           "slowest": 0.22, "evaluations": 2, "device": "cpu", "run_id": "r", "candidate_id": 1, "kernel": "abc"}
    console = Console(width=250, record=True)
    console.print(best_table([row]))
    assert "no speedup found (0.24x [0.23-0.25] slower)" in console.export_text()
    best = {"speedup": 1.1, "speedup_ci": [0.97, 1.25], "speedup_significant": False, "round": 1, "path": "b.py"}
    assert "1.10x [0.97-1.25] not significant" in best_label(best, False)


def test_gate_min_speedup_fails_a_kernel_that_holds_but_is_not_faster() -> None:
    from kernelwright.gate_service import GateResult, require_speedup

    def results() -> list[GateResult]:
        return [GateResult("GELU", "candidate 1", "accepted", 0.24, [], (0.23, 0.25), significant=True),
                GateResult("ReLU", "candidate 2", "accepted", 1.1, [], (0.97, 1.25), significant=False),
                GateResult("Softmax", "candidate 3", "accepted", 1.6, [], (1.4, 1.8), significant=True),
                GateResult("Tanh", "candidate 4", "incorrect", None, ["[compare] wrong"])]

    assert [r.ok for r in require_speedup(results(), None)] == [True, True, True, False]  # correctness only
    gated = require_speedup(results(), 1.0)
    assert [r.verdict for r in gated] == ["too_slow", "too_slow", "accepted", "incorrect"]
    assert gated[1].reasons[0].startswith("[min-speedup] re-measured 1.10x [0.97-1.25] not significant")
    assert [r.verdict for r in require_speedup(results(), 0.2)][:3] == ["accepted"] * 3  # below 1.0: the point


def test_the_fast_p_chart_counts_as_the_fast_p_table_does() -> None:
    import re

    from reports.metrics import summarize
    from reports.run_report import _fast_p_curve

    rows = [{"level": 1, "verdict": "accepted", "speedup": 1.3, "speedup_ci": [0.9, 1.6]},  # holds 1.0
            {"level": 1, "verdict": "accepted", "speedup": 2.0, "speedup_ci": [1.8, 2.2]}]
    table = summarize(rows)["fast_p"]
    points = re.search(r'polyline points="([^"]+)"', _fast_p_curve([(1.3, 0.9), (2.0, 1.8)], 2)).group(1).split()
    heights = {round((float(x) - 45) / 128, 1): (180 - float(y)) / 150 for x, y in (p.split(",") for p in points)}
    for p in (0.0, 0.5, 0.8, 1.0, 1.5, 2.0):
        assert heights[p] == pytest.approx(table[f"{p:g}"]), p
    assert table["1"] == 0.5  # the point estimates alone would say 100%


def test_report_tables_wrap_inside_a_1280_px_window() -> None:
    from reports.run_report import _STYLE

    assert "table{" in _STYLE and "max-width:100%" in _STYLE.split("table{")[1].split("}")[0]
    assert "overflow-wrap:anywhere" in _STYLE  # a long unbroken reason wraps instead of widening its column


def test_the_eval_table_says_which_medians_the_speedup_comes_from() -> None:
    from reports.speedups import speedup_origin

    origin = speedup_origin({"set_speedups": [2.1, 2.264, 2.31]})
    assert origin is not None and origin.startswith("median of 3 process sets' speedups: 2.10x, 2.26x, 2.31x")
    assert speedup_origin({"set_speedups": [1.2]}) is None and speedup_origin(None) is None
