"""Problem-level services for the CLI: size-reduction reports (and the shrunk files), canary checks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from kernelbench.problem import Problem, ProblemError
from kernelbench.shrink import Footprint, describe_changes, shrink_problem
from kernelwright.eval_service import UsageError
from kernelwright.interrupts import Interrupted


def parse_levels(text: str | None) -> set[int] | None:
    """`--level 1,2` as a set of levels (None: every level)."""
    try:
        return {int(x) for x in text.split(",")} if text else None
    except ValueError:
        raise UsageError(f"--level {text!r}: expected numbers such as 1,2") from None


class ChecksInterrupted(Interrupted):
    """Ctrl-C during `problems check`: `rows` are the problems checked before it."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        super().__init__(f"interrupted after {len(rows)} problem(s); the rows above are the finished ones")
        self.rows = rows


def _describe(footprint: Footprint) -> str:
    """Bytes and FLOPs; PyTorch's FLOP counter counts matmuls and convolutions only, and the label says so."""
    return f"{footprint.bytes / 2**20:.1f} MiB, {footprint.flops:.3g} matmul/conv FLOP"


def _check_destination(problems: list[Problem], folder: Path) -> None:
    """Never write a shrunk file over a problem it was made from."""
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--write {folder}: not a folder")
    sources = {Path(p.path).resolve() for p in problems if p.path}
    clashes = [p.file_name for p in problems if (folder / p.file_name).resolve() in sources]
    if clashes:
        raise UsageError(f"--write {folder} would overwrite the original {clashes[0]}: choose another folder")


def _write(problem: Problem, folder: Path) -> str:
    target = folder / problem.file_name
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(problem.source)
    except OSError as exc:
        raise UsageError(f"cannot write {target}: {exc.strerror or exc}") from None
    return str(target)


def shrink_report(problems: list[Problem], progress: Callable[[str], None] | None = None,
                  write_to: Path | None = None) -> list[dict[str, Any]]:
    """How each problem is rescaled to the CPU budget; with `write_to`, every problem that shrinks or fits is
    written there in the same layout (`levelN/<id>_<Name>.py`), a folder `eval`, `sweep` and `gate` take as is."""
    if write_to is not None:
        _check_destination(problems, write_to)
    rows: list[dict[str, Any]] = []
    for index, problem in enumerate(problems):
        if progress:
            progress(f"[{index + 1}/{len(problems)}] {problem.key}")
        try:
            result = shrink_problem(problem)
        except ProblemError as exc:
            rows.append({"problem": problem.key, "status": "cannot shrink", "reason": str(exc)})
            continue
        rows.append({"problem": problem.key, "status": "shrunk" if result.changes else "fits",
                     "before": _describe(result.before), "after": _describe(result.after),
                     "changes": describe_changes(result.changes)})
        if write_to is not None:
            rows[-1]["written"] = _write(result.problem, write_to)
    return rows


def check_problems(problems: list[Problem], device: str, shrink: bool, trials: int = 4,
                   progress: Callable[[str], None] | None = None,
                   on_row: Callable[[dict[str, Any]], None] | None = None,
                   output: Path | None = None) -> list[dict[str, Any]]:
    """Run the canaries over each problem: which trivial outputs pass on the problem's own inputs, and which
    still pass once kernelwright's input distributions harden it. `on_row` gets each problem's row as soon as
    it is known, and `output` (a JSONL file) has it appended then (a killed check keeps what it finished).
    Ctrl-C raises ChecksInterrupted with the finished rows."""
    finished: list[dict[str, Any]] = []

    def keep(row: dict[str, Any]) -> None:
        finished.append(row)
        if on_row:
            on_row(row)
        if output:
            try:
                with open(output, "a") as sink:
                    sink.write(json.dumps(row) + "\n")
            except OSError as exc:
                raise UsageError(f"cannot write {output}: {exc.strerror or exc}") from None

    try:
        return _check_each(problems, device, shrink, trials, progress, keep)
    except KeyboardInterrupt:
        raise ChecksInterrupted(finished) from None


def _check_each(problems: list[Problem], device: str, shrink: bool, trials: int,
                progress: Callable[[str], None] | None,
                on_row: Callable[[dict[str, Any]], None]) -> list[dict[str, Any]]:
    import secrets

    from harness.policy import EvalPolicy
    from harness.verification.canaries import passing_canaries
    from harness.verification.reference import run_reference

    policy = EvalPolicy(trials=trials)
    rows: list[dict[str, Any]] = []
    for index, problem in enumerate(problems):
        if progress:
            progress(f"[{index + 1}/{len(problems)}] {problem.key}")
        try:
            target = shrink_problem(problem).problem if shrink else problem
            seeds = [secrets.randbits(31) for _ in range(trials)]
            own = run_reference(target, device, 0, seeds, vary_distributions=False)
            hardened = run_reference(target, device, 0, seeds, vary_distributions=True)
        except ProblemError as exc:
            rows.append({"problem": problem.key, "status": "error", "reason": str(exc)})
            on_row(rows[-1])
            continue
        weak, still = passing_canaries(own, policy), passing_canaries(hardened, policy)
        status = "degenerate" if still else ("hardened" if weak else "ok")
        rows.append({"problem": problem.key, "status": status, "passes_on_own_inputs": weak,
                     "passes_after_hardening": still,
                     "reason": _canary_reason(weak, still)})
        on_row(rows[-1])
    return rows


def _canary_reason(weak: list[str], still: list[str]) -> str:
    if still:
        return (f"trivial output(s) {', '.join(still)} pass even with varied inputs: the problem cannot tell them "
                "from a real kernel (outputs too small or insensitive to the inputs)")
    if weak:
        return (f"{', '.join(weak)} pass on the problem's own inputs (KernelBench's harness would accept them); "
                "kernelwright's varied input distributions make them fail")
    return "every canary fails"
