"""What a user reads: a build failure opens with the candidate's compiler errors at its own lines (the digest the
model reads), in `eval`'s table, `gate`'s cell and `runs show`."""

from __future__ import annotations

import pytest
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


# flags of other tools that our code passes or quotes (ncu, nvcc, git, bubblewrap, nm), not advice to a user
_OTHER_TOOLS = {"--undefined-only", "--demangle", "--visible", "--hidden", "--writable", "--sysroot", "--use", "--untracked-files", "--porcelain",
                "--target-processes", "--metrics", "--log-file", "--launch-count", "--kernel-name", "--include",
                "--csv", "--compiler-bindir", "--clock-control", "--resources", "--message"}


def _cli_flags() -> set[str]:
    import click
    import typer

    from kernelwright.cli import app

    flags: set[str] = {"--help"}

    def walk(command: click.Command) -> None:
        for param in command.params:
            flags.update(o for o in [*param.opts, *param.secondary_opts] if o.startswith("--"))
        for sub in getattr(command, "commands", {}).values():
            walk(sub)

    walk(typer.main.get_command(app))
    return flags


def test_every_flag_the_code_tells_a_user_about_exists() -> None:
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    named: dict[str, str] = {}
    for package in ("kernelwright", "harness", "agent", "sweeps", "kernelbench", "reports", "store"):
        for file in (root / package).rglob("*.py"):
            for flag in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*[a-z0-9]", file.read_text()):
                named.setdefault(flag, str(file.relative_to(root)))
    flags = _cli_flags()
    missing = {flag: where for flag, where in named.items() if flag not in flags and flag not in _OTHER_TOOLS}
    assert not missing, missing
    assert "--timing-budget" in flags


def test_timing_budget_reaches_the_policy_of_each_command() -> None:
    from agent.run_spec import Execution
    from kernelwright.eval_service import eval_policy
    from kernelwright.optimize_service import optimize_config
    from kernelwright.sweep_service import sweep_config

    assert eval_policy("default", timing_budget_s=2.5).timing_budget_s == 2.5
    assert eval_policy("default", timing_budget_s=None).timing_budget_s == 1.0  # not given: the default
    assert optimize_config(Execution(), timing_budget_s=0.5).policy.timing_budget_s == 0.5
    sweep = sweep_config(Execution(), None, 2, None, 300.0, 900.0, False, False, False, timing_budget_s=3.0)
    assert sweep.policy.timing_budget_s == 3.0 and sweep.optimize.policy.timing_budget_s == 3.0


def test_a_self_check_prints_only_what_concerns_an_a_a() -> None:
    from kernelwright.eval_service import self_check_reasons

    reasons = ["[problem-override] the candidate defines Model", "[no-kernel] no custom kernel was built",
               "[noise] two copies of the reference timed in the same rotation read 1.04x"]
    assert self_check_reasons(reasons) == reasons[2:]


_USAGE_ERROR_IMPORTS = """
import sys
from kernelwright.cli import app
try:
    app(sys.argv[1:], prog_name="kernelwright")
except SystemExit as exit:
    print(exit.code, sorted(m for m in ("torch", "sqlalchemy", "harness.pipeline") if m in sys.modules))
"""


@pytest.mark.parametrize("args", [("eval", "nosuchproblem", "k.py"), ("eval", "relu", "nosuch.py"),
                                  ("optimize", "nosuchproblem"), ("gate", "--solutions", "/nonexistent"),
                                  ("sweep", "/nonexistent"), ("export", "o.jsonl", "--format", "nope"),
                                  ("problems", "shrink", "/nonexistent"), ("export-op", "relu", "nosuch.py", "out"),
                                  ("export-op", "relu", "kernelbench/bundled/candidates/cpu/level1/1_ReLU.py", "out",
                                   "--bucket", "batch_size=1-64")])
def test_a_usage_error_comes_before_anything_heavy_is_imported(args: tuple[str, ...]) -> None:
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", _USAGE_ERROR_IMPORTS, *args], capture_output=True, text=True,
                          timeout=120, cwd=root)
    assert done.stdout.strip() == "2 []", (done.stdout, done.stderr)  # exit 2, neither torch nor SQLAlchemy
    assert "error:" in done.stderr and "Traceback" not in done.stderr


def test_ctrl_c_during_the_envelope_leaves_the_run_interrupted_with_its_resume_command(
        tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent.config import OptimizeConfig
    from agent.run_spec import ModelSpec
    from kernelwright import optimize_service
    from kernelwright.interrupts import RunInterrupted
    from kernelwright.runs_service import runs_list
    from tests.agent.fake_executor import ScriptedExecutor, coder_reply, fake_kernel
    from tests.agent.fake_server import ScriptedServer

    def ctrl_c(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(optimize_service, "_with_envelope", ctrl_c)
    monkeypatch.setenv("LOCAL_KEY", "local-secret")
    db = f"sqlite:///{tmp_path / 'e.db'}"
    with ScriptedServer([("ok", coder_reply(fake_kernel("accepted 1.5"))["content"])]) as server:
        models = ModelSpec(model="scripted-model", base_url=server.url, api_key_env="LOCAL_KEY")
        with pytest.raises(RunInterrupted) as stopped:
            optimize_service.run_optimize("relu", OptimizeConfig(device="cpu", rounds=1), models, db,
                                          executor=ScriptedExecutor())
    (run,) = runs_list(db)
    assert run["status"] == "interrupted" and f"kernelwright optimize --resume {run['run_id']}" in stopped.value.message


def test_a_long_cpu_evaluation_is_announced_with_the_shrink_hint() -> None:
    from harness.policy import EvalPolicy
    from kernelbench.problem import problem_from_source
    from kernelwright.eval_service import cost_note
    from tests.kernelbench.test_shrink import TIED_GEMM

    note = cost_note(problem_from_source(TIED_GEMM, "12_Gemm"), "cpu", EvalPolicy())
    assert note is not None and "FLOP" in note and "minutes" in note and note.endswith("--shrink rescales it to the "
                                                                                       "CPU budget")
    assert cost_note(problem_from_source(TIED_GEMM, "12_Gemm"), "cuda", EvalPolicy()) is None
    small = TIED_GEMM.replace("batch_size = 1024", "batch_size = 4").replace("8192", "64")
    assert cost_note(problem_from_source(small, "12_Gemm"), "cpu", EvalPolicy()) is None
