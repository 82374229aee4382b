"""Profiler, compiler and telemetry evidence, parsed from recorded output (no GPU needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.feedback.ncu import METRICS, diagnose_failure, ncu_command, parse_ncu_csv, render_for_judge
from harness.feedback.nvml import snapshot, telemetry_flags
from harness.feedback.sass import parse_sass

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def test_ncu_csv_becomes_one_record_per_launch_with_short_metric_names() -> None:
    records = parse_ncu_csv((FIXTURES / "ncu_relu.csv").read_text())
    assert len(records) == 2
    first = records[0]
    assert first["kernel"] == "relu_kernel" and first["grid"] == "(1024, 1, 1)" and first["block"] == "(256, 1, 1)"
    assert first["dram_pct"] == pytest.approx(87.95) and first["dram_read_bytes"] == 1048576.0
    assert first["registers_per_thread"] == 16.0 and first["duration_ns"] == 5312.0
    assert set(METRICS.values()) <= set(first)


def test_judge_sees_a_compact_line_per_kernel() -> None:
    text = render_for_judge(parse_ncu_csv((FIXTURES / "ncu_relu.csv").read_text())[:1])
    assert "relu_kernel" in text and "DRAM 88%" in text and "occupancy 81% of 100% theoretical" in text
    assert "limited by registers" in text and "long_scoreboard 72%" in text and "bank conflicts 0" in text


def test_profiling_failures_say_why() -> None:
    assert "NVreg_RestrictProfilingToAdminUsers" in diagnose_failure("==ERROR== ERR_NVGPUCTRPERM - no access")
    assert "no kernel" in diagnose_failure("")


def test_ncu_command_targets_only_the_candidates_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shutil.which", lambda tool: f"/opt/{tool}")
    command = ncu_command(["relu_kernel", "gemm<64>"], "out.csv")
    assert command[:2] == ["/opt/ncu", "--csv"] and "none" == command[command.index("--clock-control") + 1]
    assert command[command.index("--kernel-name") + 1] == r"regex:relu_kernel|gemm<64>"
    monkeypatch.setattr("shutil.which", lambda tool: None)
    assert ncu_command(["k"], "out.csv") is None


def test_sass_mix_counts_categories() -> None:
    mix = parse_sass((FIXTURES / "relu_sm90.sass").read_text())
    assert mix["instructions"] == 10
    categories = mix["categories"]
    assert (categories["global_memory"], categories["fp32"], categories["control"]) == (2, 1, 3)
    assert categories["local_memory_spills"] == 0


def test_telemetry_flags_throttling_foreign_processes_and_clock_drops() -> None:
    calm = {"throttle": [], "foreign_processes": [], "sm_clock_mhz": 1980}
    assert telemetry_flags(calm, calm) == []
    hot = {"throttle": ["hw_thermal"], "foreign_processes": [777], "sm_clock_mhz": 1500}
    flags = " ".join(f.render() for f in telemetry_flags(calm, hot))
    assert "hw_thermal" in flags and "777" in flags and "1980 to 1500" in flags
    assert telemetry_flags(calm, {"throttle": ["sw_power_cap"]}) == []  # a power cap alone is normal


def test_nvml_snapshot_without_a_gpu_is_a_reason_not_an_exception() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert "error" in snapshot()


def test_a_metric_ncu_cannot_collect_is_dropped_not_sent_as_text() -> None:
    """Nsight Compute 2025.3 reads `n/a` for one stall metric: the record must hold numbers only."""
    text = (FIXTURES / "ncu_relu.csv").read_text()
    line = next(l for l in text.splitlines() if "smsp__warp_issue_stalled_memory_throttle" in l)
    records = parse_ncu_csv(text.replace(line, line.rsplit(",", 1)[0] + ',"n/a"'))
    assert all(isinstance(v, float) for r in records for k, v in r.items() if k not in ("kernel", "block", "grid"))
    assert "stall_memory_throttle_pct" not in records[0] and "dram_pct" in records[0]


def test_profiling_on_another_device_is_a_reason(tmp_path: Path) -> None:
    from harness.pipeline import evaluate
    from harness.policy import EvalPolicy
    from harness.execution.profile import profile_accepted
    from kernelbench.bundled import find_bundled

    relu = find_bundled("relu")
    evaluation = evaluate(relu, "syntax error (", "cpu", EvalPolicy())
    profile_accepted(relu, "", evaluation, EvalPolicy())
    assert evaluation.metrics == {"error": "profiling needs the cuda device (Nsight Compute)"}
