"""`kernelwright rescore`: re-judge stored kernels under the current harness, so a reward an earlier harness paid
does not outlive the hole it came through.

Each kernel selected (by default those whose latest verdict is `accepted`; `--all` any verdict; `--run`,
`--problem`, `--older-than VERSION` narrow it) is evaluated again with fresh secret seeds, through the executor
`gate` uses (parallel builds, one timing slot; Ray when asked), and the result is stored as a new evaluation linked
to the one it re-judges (`rescore_of`): nothing is overwritten, and exports read the latest verdict per kernel.
Resumable: a kernel whose latest evaluation was made by the current checks on this device is skipped (`--again`
re-judges it anyway), so a rescore stopped halfway continues where it stopped. What changed is reported per
kernel and counted by the check that decided the new verdict."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from harness.decision.version import checks_version
from harness.policy import EvalPolicy
from harness.records import Evaluation, Verdict
from harness.device import resolve_device
from harness.execution.eval_task import ExecutorUnavailable
from kernelwright.eval_service import UsageError
from kernelwright.gate_service import GateInterrupted, GateOutcome, Progress, _tampering, evaluate_all
from kernelwright.interrupts import Interrupted
from store import open_store
from store.browse import get_run_row
from store.models import UNVERSIONED, EvaluationRow
from store.rejudge import Judged, latest_judgements, versions_in_order
from store.results import add_evaluation, problem_of

CURRENT = "current"  # --older-than current: every version but the one this harness computes


@dataclass
class RescoreSelection:
    """Which stored kernels to re-judge."""

    everything: bool = False  # every latest verdict, not only `accepted`
    run_id: str | None = None
    problem: str | None = None  # problems whose key contains this text
    older_than: str | None = None  # judged by a version first seen here before this one (or `current`)
    again: bool = False  # re-judge kernels the current checks already judged on this device


@dataclass
class Rescored:
    """One kernel: its verdict before (the evaluation re-judged) and after (the new one, stored)."""

    problem: str
    candidate_id: int
    before: str
    before_speedup: float | None
    before_version: str
    before_evaluation_id: int
    after: str  # a Verdict value, or GateOutcome.TAMPERED (not re-evaluated)
    after_speedup: float | None = None
    after_interval: list[float] | None = None
    after_version: str | None = None
    evaluation_id: int | None = None
    decided_by: str | None = None  # the check whose finding decided a verdict other than accepted
    reasons: list[str] = field(default_factory=list)
    shrunk: str | None = None

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def as_json(self) -> dict[str, Any]:
        return {"problem": self.problem, "shrunk": self.shrunk, "candidate_id": self.candidate_id,
                "changed": self.changed,
                "before": {"verdict": self.before, "speedup": self.before_speedup,
                           "checks_version": self.before_version, "evaluation_id": self.before_evaluation_id},
                "after": {"verdict": self.after, "speedup": self.after_speedup, "speedup_ci": self.after_interval,
                          "checks_version": self.after_version, "evaluation_id": self.evaluation_id},
                "decided_by": self.decided_by, "reasons": self.reasons}


@dataclass
class RescoreReport:
    checks_version: str
    device: str
    skipped_current: int  # selected, but already judged by the current checks on this device
    results: list[Rescored]

    @property
    def by_check(self) -> dict[str, int]:
        """Kernels whose verdict changed, by the check that decided the new one (`accepted` for those it passed)."""
        counted = Counter(r.decided_by or r.after for r in self.results if r.changed)
        return dict(sorted(counted.items()))

    def as_json(self) -> dict[str, Any]:
        return {"checks_version": self.checks_version, "device": self.device, "rescored": len(self.results),
                "changed": sum(r.changed for r in self.results), "skipped_current": self.skipped_current,
                "by_check": self.by_check, "results": [r.as_json() for r in self.results]}


def _older(versions: list[str], older_than: str, current: str) -> set[str]:
    """The versions first seen in this store before `older_than` ("unversioned" is older than any)."""
    if older_than == CURRENT:
        older_than = current
    if older_than not in versions:
        if older_than != current:
            raise UsageError(f"--older-than {older_than!r}: no evaluation in this store was judged by it (known: "
                             f"{', '.join(versions) or 'none'}; or `current`)")
        return set(versions) - {current}
    return set(versions[:versions.index(older_than)])


def _selected(judged: list[Judged], selection: RescoreSelection, device: str, current: str,
              older: set[str] | None) -> tuple[list[Judged], int]:
    """The kernels to re-judge, and how many of those selected the current checks already judged here."""
    chosen, current_here = [], 0
    for row in judged:
        evaluation = row.evaluation
        if not selection.everything and evaluation.verdict != Verdict.ACCEPTED.value:
            continue
        if selection.problem and selection.problem.lower() not in problem_of(row.candidate.problem).key.lower():
            continue
        if older is not None and evaluation.checks_version not in older:
            continue
        if not selection.again and evaluation.checks_version == current and evaluation.device == device:
            current_here += 1
            continue
        chosen.append(row)
    return chosen, current_here


def _decided_by(evaluation: Evaluation) -> str | None:
    if evaluation.accepted:
        return None
    deciding = next((f for f in evaluation.findings if f.decides), None)
    tag = getattr(deciding.check, "value", deciding.check) if deciding is not None else ""
    return str(tag) or evaluation.verdict.value


def _before(row: Judged) -> Rescored:
    problem = problem_of(row.candidate.problem)
    evaluation: EvaluationRow = row.evaluation
    return Rescored(problem.key, row.candidate.id, evaluation.verdict, evaluation.speedup,
                    evaluation.checks_version or UNVERSIONED, evaluation.id, after="", shrunk=problem.shrunk)


def rescore_store(db_url: str | None, device: str, policy: EvalPolicy, selection: RescoreSelection,
                  progress: Progress | None = None, workers: int | None = None, executor: str = "local",
                  ray_address: str | None = None) -> RescoreReport:
    """Re-judge the selected kernels; each new evaluation is stored (linked to the old) as soon as it is made."""
    sessions = open_store(db_url, create=False)
    if selection.run_id and get_run_row(sessions, selection.run_id) is None:
        raise UsageError(f"no run {selection.run_id!r} in this store (see `kernelwright runs list`)")
    device = resolve_device(device)
    current = checks_version(policy)
    older = _older(versions_in_order(sessions), selection.older_than, current) if selection.older_than else None
    chosen, current_here = _selected(latest_judgements(sessions, selection.run_id), selection, device, current, older)
    results = {row.candidate.id: _before(row) for row in chosen}
    intact = []
    for row in chosen:
        tampered = _tampering(row.candidate)
        if tampered:
            results[row.candidate.id].after, results[row.candidate.id].reasons = GateOutcome.TAMPERED.value, tampered
        else:
            intact.append(row)

    def keep(index: int, evaluation: Evaluation) -> None:
        row = intact[index]
        result = results[row.candidate.id]
        result.evaluation_id = add_evaluation(sessions, row.candidate.id, evaluation, rescore_of=row.evaluation.id)
        result.after, result.after_speedup = evaluation.verdict.value, evaluation.speedup
        result.after_interval = list(evaluation.speedup_ci) if evaluation.speedup_ci else None
        result.after_version, result.decided_by = evaluation.checks_version, _decided_by(evaluation)
        result.reasons = evaluation.reasons

    work = [(problem_of(row.candidate.problem), row.candidate.source) for row in intact]
    try:
        evaluate_all(work, device, policy, workers, progress, keep, executor, ray_address)
    except ExecutorUnavailable as exc:
        raise UsageError(str(exc)) from None
    except GateInterrupted as stop:
        raise Interrupted(f"interrupted: {stop.done} of {stop.total} kernels were re-judged and stored; run the same "
                          "`kernelwright rescore` again to continue (what the current checks judged is skipped)") \
            from None
    return RescoreReport(current, device, current_here, [results[row.candidate.id] for row in chosen])
