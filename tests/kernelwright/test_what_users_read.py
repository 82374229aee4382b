"""What a user reads: a build failure opens with the candidate's compiler errors at its own lines (the digest the
model reads), in `eval`'s table, `gate`'s cell and `runs show`."""

from __future__ import annotations

from rich.console import Console

from tests.harness.feedback.test_failure_digest import CPU_CANDIDATE, GCC_REASON


def _text(table: object) -> str:
    console = Console(record=True, width=250)
    console.print(table)
    return console.export_text()


def test_a_build_failure_opens_with_the_candidates_error_lines() -> None:
    from harness.records import Evaluation, Verdict
    from kernelbench.bundled import find_bundled
    from kernelwright.gate_service import GateResult
    from kernelwright.render import evaluation_table, gate_table

    evaluation = Evaluation(verdict=Verdict.COMPILE_ERROR, reasons=[GCC_REASON], problem_name="ReLU",
                            problem_fingerprint="f", candidate_hash="c", device="cpu")
    shown = _text(evaluation_table(find_bundled("relu"), evaluation, CPU_CANDIDATE))
    reason = shown[shown.index("reason"):]
    assert "line 16 of your file" in reason and "-isystem" not in reason and "ninja:" not in reason
    assert reason.index("TORCH_CHECK") < 400  # within the first lines, not after ~28 lines of commands
    gate = GateResult("level1/19_ReLU", "k.py", "compile_error", reasons=[GCC_REASON], source=CPU_CANDIDATE)
    cell = _text(gate_table([gate]))
    assert "TORCH_CHECK" in cell and "line 16 of your file" in cell and "-isystem" not in cell


def test_runs_show_gives_a_builds_first_error_not_its_preamble() -> None:
    from kernelwright.runs_service import _shown

    row = _shown({"verdict": "compile_error", "reason": GCC_REASON, "source": CPU_CANDIDATE, "round": 1})
    assert row["reason"].startswith("line 13 of `cpp_source` (line 16 of your file)") and "source" not in row
