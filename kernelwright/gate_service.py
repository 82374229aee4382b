"""`kernelwright gate`: re-verify accepted kernels (from the store or a folder) in fresh processes with new
secret seeds and every check. Anything that no longer holds fails the gate, by name and with the reason."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Callable

from harness.policy import EvalPolicy
from harness.records import Evaluation, Verdict
from harness.device import resolve_device
from harness.pipeline import candidate_hash
from harness.execution.eval_task import EvalTask
from harness.execution.executor import open_executor
from kernelbench.bundled import PROBLEMS_ROOT
from kernelbench.matching import match_solution
from kernelbench.shrink import shrink_problem
from kernelbench.problem import Problem, fingerprint_source, load_problems
from kernelwright.eval_service import SHRINK_HINT, UsageError, unallocatable
from kernelwright.interrupts import stop_on_ctrl_c
from reports.speedups import faster, speedup_cell
from store import CandidateRow, open_store, record_evaluation
from store.results import StoredSpeedup, accepted_candidates, add_evaluation, problem_of, stored_speedup

Progress = Callable[[str], None]


class GateOutcome(str, Enum):
    """What the gate found where no harness verdict is the answer (a GateResult's verdict is a Verdict value or
    one of these)."""

    TAMPERED = "tampered"  # the stored source or problem no longer matches its hash: not re-evaluated
    UNREPRODUCED = "unreproduced"  # accepted again, but the stored speedup is out of reach of the re-measurement
    UNMATCHED = "unmatched"  # a solution file that no problem matches
    TOO_SLOW = "too_slow"  # accepted, but not the gain `--min-speedup` requires


@dataclass
class GateResult:
    problem: str
    kernel: str  # candidate id in the store, or the solution's path
    verdict: str  # a Verdict or a GateOutcome value
    speedup: float | None = None
    reasons: list[str] = field(default_factory=list)
    interval: tuple[float, float] | None = None  # the re-measured speedup's 95% interval
    stored_speedup: float | None = None  # what the store held for this kernel on this device before the gate
    evaluation_id: int | None = None  # where the re-measurement is stored
    shrunk: str | None = None  # the size changes when the problem was shrunk to the CPU budget
    significant: bool | None = None  # the re-measured interval clears 1.0 (and the noise floor)
    source: str | None = None  # the kernel's file: its build errors are shown at its own lines

    @property
    def ok(self) -> bool:
        return self.verdict == Verdict.ACCEPTED.value

    def as_json(self) -> dict[str, object]:
        return {"problem": self.problem, "shrunk": self.shrunk, "kernel": self.kernel, "verdict": self.verdict,
                "ok": self.ok, "speedup": self.speedup, "speedup_ci": list(self.interval) if self.interval else None,
                "speedup_significant": self.significant,
                "stored_speedup": self.stored_speedup, "evaluation_id": self.evaluation_id, "reasons": self.reasons}


class GateInterrupted(Exception):
    """Ctrl-C: the gate stopped early; `done` kernels were verified (and stored) before it did."""

    def __init__(self, done: int, total: int) -> None:
        super().__init__(f"{done}/{total}")
        self.done, self.total = done, total


def _stored_candidates(db_url: str | None, run_id: str | None, problem_filter: str | None) -> list[CandidateRow]:
    rows = accepted_candidates(open_store(db_url, create=False), run_id)
    if problem_filter:
        rows = [r for r in rows if problem_filter.lower() in problem_of(r.problem).key.lower()]
    return rows


def _tampering(row: CandidateRow) -> list[str]:
    found = []
    if candidate_hash(row.source) != row.source_hash:
        found.append("[tampered] the stored kernel's source no longer matches the hash it was accepted with")
    if fingerprint_source(row.problem.source) != row.problem.fingerprint:
        found.append("[tampered] the stored problem's source no longer matches its fingerprint")
    return found


NOISE_BAND = 1.25  # a stored speedup this far above the re-measured interval's top cannot be reproduced


def speedup_not_reproduced(stored: float | None, evaluation: object, stored_low: float | None = None) -> str | None:
    """A reason when the stored speedup is outside what a fresh measurement supports, else None: the two intervals
    do not overlap (both are widened by their runs' A/A floors), or, whatever the stored interval says, the stored
    point is over NOISE_BAND times the re-measured interval's top."""
    interval = getattr(evaluation, "speedup_ci", None)
    if stored is None or not interval or getattr(evaluation, "verdict", None) != Verdict.ACCEPTED:
        return None
    if stored > interval[1] * NOISE_BAND or (stored_low is not None and stored_low > interval[1]):
        return (f"[speedup] the store says {stored:.2f}x; re-measured {evaluation.speedup:.2f}x (95% interval "  # type: ignore[attr-defined]
                f"{interval[0]:.2f}-{interval[1]:.2f}x): the stored speedup cannot be reproduced")
    return None


def evaluate_all(work: list[tuple[Problem, str]], device: str, policy: EvalPolicy, workers: int | None,
                 progress: Progress | None, on_result: Callable[[int, Evaluation], None], executor_kind: str = "local",
                 ray_address: str | None = None) -> None:
    """Every kernel through one executor (`local`, or `ray`): builds in parallel, timed one at a time;
    `on_result(index, evaluation)` as each finishes, in `work`'s order. Ctrl-C kills what is in flight at once and
    raises GateInterrupted (an evaluation cut short is no verdict and is not recorded). `rescore` shares it."""
    executor = open_executor(executor_kind, device, workers, ray_address)
    stopped = False
    done = 0

    def stop() -> None:
        nonlocal stopped
        stopped = True

    try:
        with stop_on_ctrl_c(stop):
            futures = [executor.submit(EvalTask(problem.key, problem, source, device, policy))
                       for problem, source in work]
            for index, ((problem, _), future) in enumerate(zip(work, futures)):
                evaluation = future.result()
                if stopped:
                    raise KeyboardInterrupt
                on_result(index, evaluation)
                done += 1
                if progress:
                    progress(f"[{index + 1}/{len(work)}] {problem.label}: {evaluation.verdict.value}")
    except KeyboardInterrupt:
        raise GateInterrupted(done, len(work)) from None
    finally:
        executor.shutdown()


def require_speedup(results: list[GateResult], min_speedup: float | None) -> list[GateResult]:
    """`--min-speedup X`: a kernel that still holds but is re-measured below X, or (from X = 1.0 up) not
    significantly faster than the reference, fails the gate as `too_slow`."""
    if min_speedup is None:
        return results
    for result in results:
        if not result.ok:
            continue
        gain = result.speedup is not None and result.speedup >= min_speedup and (
            min_speedup < 1.0 or faster(result.speedup, result.interval, result.significant))
        if not gain:
            result.verdict = GateOutcome.TOO_SLOW.value
            result.reasons = [f"[min-speedup] re-measured "
                              f"{speedup_cell(result.speedup, result.interval, result.significant)}: the gate "
                              f"requires at least {min_speedup:g}x" + (", significantly faster than the reference"
                                                                      if min_speedup >= 1.0 else "")] + result.reasons
    return results


def _interval(evaluation: Evaluation) -> tuple[float, float] | None:
    return tuple(evaluation.speedup_ci) if evaluation.speedup_ci else None  # type: ignore[return-value]


def gate_store(db_url: str | None, device: str, policy: EvalPolicy, run_id: str | None = None,
               problem_filter: str | None = None, progress: Progress | None = None,
               workers: int | None = None, shrink: bool = False,
               min_speedup: float | None = None) -> list[GateResult]:
    """Re-verify the store's accepted kernels; each re-measurement is stored as a new evaluation of the same
    candidate (so `runs best` counts it), as soon as it is made."""
    if shrink:
        raise UsageError("--shrink applies to --solutions: a stored kernel is verified on the problem it was "
                         "stored with (already shrunk if it was)")
    rows = _stored_candidates(db_url, run_id, problem_filter)
    if not rows:
        raise UsageError("no accepted kernels in the store match: nothing to verify (check --db, --run, --problem)")
    device = resolve_device(device)
    sessions = open_store(db_url, create=False)
    results: dict[int, GateResult] = {}
    intact = []
    for row in rows:
        tampered = _tampering(row)
        if tampered:
            problem = problem_of(row.problem)
            results[row.id] = GateResult(problem.key, f"candidate {row.id}", GateOutcome.TAMPERED.value,
                                         reasons=tampered, shrunk=problem.shrunk)
        else:
            intact.append(row)
    stored: dict[int, StoredSpeedup] = {row.id: stored_speedup(sessions, row.id, device) for row in intact}

    def keep(index: int, evaluation: Evaluation) -> None:
        row = intact[index]
        problem = problem_of(row.problem)
        evaluation_id = add_evaluation(sessions, row.id, evaluation)
        unreproduced = speedup_not_reproduced(stored[row.id].speedup, evaluation, stored[row.id].low)
        verdict = GateOutcome.UNREPRODUCED.value if unreproduced else evaluation.verdict.value
        results[row.id] = GateResult(problem.key, f"candidate {row.id}", verdict, evaluation.speedup,
                                     ([unreproduced] if unreproduced else []) + evaluation.reasons,
                                     _interval(evaluation), stored[row.id].speedup, evaluation_id, problem.shrunk,
                                     evaluation.speedup_significant, row.source)

    evaluate_all([(problem_of(row.problem), row.source) for row in intact], device, policy, workers, progress,
                  keep)
    return require_speedup([results[row.id] for row in rows], min_speedup)


def _matched(solutions: Path, problems_path: Path | None, problem_filter: str | None,
             shrink: bool) -> tuple[list[Path], dict[Path, Problem]]:
    """The solution files (those of problems matching `problem_filter`, when given) and their problems."""
    if not solutions.is_dir():
        raise UsageError(f"{solutions}: not a folder of solutions")
    problems = load_problems(problems_path or PROBLEMS_ROOT)
    files = sorted(solutions.rglob("*.py"))
    if not files:
        raise UsageError(f"{solutions}: no .py solutions found")
    matched = {file: match_solution(problems, file, solutions) for file in files}
    if problem_filter:
        matched = {f: p for f, p in matched.items() if p is not None and problem_filter.lower() in p.key.lower()}
        if not matched:
            raise UsageError(f"no solution in {solutions} is for a problem matching --problem {problem_filter!r}")
    kept = {f: (shrink_problem(p).problem if shrink else p) for f, p in matched.items() if p is not None}
    return list(matched), kept


def gate_folder(solutions: Path, problems_path: Path | None, device: str, policy: EvalPolicy,
                progress: Progress | None = None, shrink: bool = False, workers: int | None = None,
                problem_filter: str | None = None, db_url: str | None = None,
                store: bool = True, run_id: str | None = None,
                min_speedup: float | None = None) -> list[GateResult]:
    """Each solution against its problem (matched by file name), only problems whose key contains
    `problem_filter` when given; `shrink` rescales problems to the CPU budget. Every evaluation is stored (unless
    `store` is False) as it finishes."""
    if run_id:
        raise UsageError("--run selects stored kernels; with --solutions the kernels are the folder's files "
                         "(use --problem to pick some)")
    files, matched = _matched(solutions, problems_path, problem_filter, shrink)
    sessions = open_store(db_url) if store else None
    device = resolve_device(device)
    too_large = [r for r in (unallocatable(p, device, policy.memory_limit_mb) for p in matched.values()) if r]
    if too_large:
        raise UsageError(f"{len(too_large)} of {len(matched)} problems cannot be allocated here, e.g. "
                         f"{too_large[0]}: {SHRINK_HINT}")
    work = list(matched.items())
    results: dict[Path, GateResult] = {}

    def keep(index: int, evaluation: Evaluation) -> None:
        file, problem = work[index]
        evaluation_id = None
        if sessions is not None:
            evaluation_id = record_evaluation(sessions, problem, file.read_text(), evaluation,
                                              origin=f"gate of {file}")
        results[file] = GateResult(problem.key, str(file), evaluation.verdict.value, evaluation.speedup,
                                   evaluation.reasons, _interval(evaluation), None, evaluation_id, problem.shrunk,
                                   evaluation.speedup_significant, file.read_text())

    evaluate_all([(p, f.read_text()) for f, p in work], device, policy, workers, progress, keep)
    return require_speedup([results.get(file) or _unmatched(file) for file in files], min_speedup)


def _unmatched(file: Path) -> GateResult:
    return GateResult("?", str(file), GateOutcome.UNMATCHED.value,
                      reasons=["no problem matches this file (name it levelN/<id>_<Name>.py)"])
