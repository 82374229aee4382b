"""The autotuning sub-loop: a kernel that declares tunables (agent/search/tunables.py) is expanded into variants,
built in parallel and screened through the executor (EvalPolicy.screening(): no LLM call per variant), and the
fastest correct one goes through the full protocol. Only that full evaluation is a result; the screened table is
shown to the judge and kept in the run's folder, and every variant is stored as a candidate with its parent."""

from __future__ import annotations

import re
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Callable

from agent.prompts import inert
from agent.search.tunables import TuneError, Variant, variants
from harness.execution.eval_task import EvalTask, Executor
from harness.policy import EvalPolicy
from harness.records import Evaluation
from kernelbench.problem import Problem

Progress = Callable[[str], None]
_BUDGET = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|seconds)?\s*$")
_WAVE = 4  # variants submitted at once under a seconds budget: the next wave starts only while time is left
MARGIN = 0.03  # a variant must beat the default's screened speed by this much to be worth a full evaluation
MAX_VARIANTS = 64  # under a seconds budget, the most variants considered


@dataclass(frozen=True)
class TuneBudget:
    """`--tune-budget`: N variants (N=0 turns tuning off), or `Ns` seconds of screening."""

    variants: int | None = 8
    seconds: float | None = None

    @classmethod
    def parse(cls, text: str) -> "TuneBudget":
        match = _BUDGET.match(str(text))
        if not match:
            raise ValueError(f"tune budget {text!r}: write a number of variants (8) or of seconds (60s)")
        number, seconds = match.group(1), match.group(2)
        if seconds:
            return cls(variants=None, seconds=float(number))
        if "." in number:
            raise ValueError(f"tune budget {text!r}: a number of variants is whole (8), seconds end in s (60s)")
        return cls(variants=int(number))

    @property
    def off(self) -> bool:
        return self.variants == 0 or self.seconds == 0


@dataclass
class TuneRow:
    """One screened variant: what the judge's tuning table shows."""

    label: str
    verdict: str
    speedup: float | None
    candidate_ms: float | None
    default: bool
    source_hash: str


@dataclass
class Tuning:
    """What tuning one kernel found: the screened table and the variant worth a full evaluation (None: the default
    stays, or nothing screened was correct)."""

    rows: list[TuneRow] = field(default_factory=list)
    winner: Variant | None = None
    seconds: float = 0.0
    error: str | None = None

    def table(self) -> list[str]:
        """The tuning table, one line a variant (screening tier: one short timing; ranks only). Labels and the
        refusal come from the candidate's TUNE: validated (agent/search/tunables.py) and escaped all the same, as
        every candidate-controlled text that reaches a prompt outside a fence (`inert`: no `<` survives)."""
        if self.error:
            return [f"tuning skipped: {inert(self.error)}"]
        lines = []
        for row in sorted(self.rows, key=lambda r: -(r.speedup or 0.0)):
            timing = f"{row.speedup:.2f}x, {row.candidate_ms:.4f} ms" if row.speedup and row.candidate_ms else "-"
            correct = "correct" if row.verdict == "accepted" else row.verdict
            lines.append(f"{inert(row.label)}{' (default)' if row.default else ''}: {timing}, {inert(correct)}")
        return lines


def tune(problem: Problem, source: str, device: str, policy: EvalPolicy, executor: Executor, budget: TuneBudget,
         say: Progress | None = None) -> tuple[Tuning, list[tuple[Variant, Evaluation]]]:
    """Screen `source`'s variants within `budget`; the screened evaluations come back beside the table (for the
    caller to file as candidates only, never as results)."""
    started, say = time.perf_counter(), say or (lambda _m: None)
    try:
        expanded = variants(source, budget.variants if budget.variants is not None else MAX_VARIANTS)
    except TuneError as exc:
        return Tuning(error=str(exc)), []
    if len(expanded) < 2:
        return Tuning(), []
    screening = policy.screening()
    say(f"tuning: screening {len(expanded)} variants" + (f" within {budget.seconds:g} s" if budget.seconds else ""))
    screened = _screen(problem, expanded, device, screening, executor, budget, started)
    tuning = Tuning([_row(variant, evaluation) for variant, evaluation in screened])
    tuning.winner = _winner(screened)
    tuning.seconds = time.perf_counter() - started
    return tuning, screened


def _screen(problem: Problem, expanded: list[Variant], device: str, policy: EvalPolicy, executor: Executor,
            budget: TuneBudget, started: float) -> list[tuple[Variant, Evaluation]]:
    """All at once under a variant budget (built in parallel, timed one at a time by the executor); in waves under
    a seconds budget, none started once the time is spent."""
    wave = len(expanded) if budget.seconds is None else _WAVE
    screened: list[tuple[Variant, Evaluation]] = []
    for first in range(0, len(expanded), wave):
        if budget.seconds is not None and time.perf_counter() - started >= budget.seconds:
            break
        batch = expanded[first:first + wave]
        futures: list[Future[Evaluation]] = [executor.submit(EvalTask(problem.key, problem, v.source, device, policy))
                                             for v in batch]
        screened += [(variant, future.result()) for variant, future in zip(batch, futures)]
    return screened


def _row(variant: Variant, evaluation: Evaluation) -> TuneRow:
    return TuneRow(variant.label, evaluation.verdict.value, evaluation.speedup if evaluation.accepted else None,
                   evaluation.candidate_ms if evaluation.accepted else None, variant.default, evaluation.candidate_hash)


def _winner(screened: list[tuple[Variant, Evaluation]]) -> Variant | None:
    """The fastest correct variant, when it is not the default and beats the default's screened speed by MARGIN
    (or the default itself failed): the default's full evaluation exists already."""
    correct = [(v, e) for v, e in screened if e.accepted and e.speedup]
    if not correct:
        return None
    best, evaluation = max(correct, key=lambda pair: pair[1].speedup or 0.0)
    default = next((e for v, e in correct if v.default), None)
    if best.default or (default is not None and (evaluation.speedup or 0.0) < (default.speedup or 0.0) * (1 + MARGIN)):
        return None
    return best
