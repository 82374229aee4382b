"""The loop's tuning hook: after a round, each accepted kernel that declares tunables is tuned (tuning.py); every
variant is stored as a candidate with its parent, the screened table goes to the run's folder and to the judge,
and the winner, evaluated by the full protocol, joins the round as one more outcome."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from agent.search.tuning import TuneBudget, Tuning, tune
from harness.execution.eval_task import EvalTask, Executor
from harness.pipeline import candidate_hash
from harness.records import Evaluation
from kernelbench.problem import Problem
from store import record_evaluation
from store.results import find_candidate_id, record_candidate

Progress = Callable[[str], None]


@dataclass
class Tuned:
    """A tuned winner: its source, its full evaluation and where its file is."""

    source: str
    evaluation: Evaluation
    label: str
    path: str


class TuneStep:
    def __init__(self, problem: Problem, device: str, policy, executor: Executor, recorder, budget: TuneBudget,
                 say: Progress) -> None:
        self.problem, self.device, self.policy, self.executor = problem, device, policy, executor
        self.recorder, self.budget, self.say = recorder, budget, say
        self.done: set[str] = set()  # kernels tuned already (a kernel kept as the best is not tuned again)
        self.seconds = 0.0

    def after(self, round_: int, slot: int, source: str) -> tuple[Tuned | None, list[str]]:
        """Tune one accepted kernel; the winner (None: none worth it) and the table's lines for the judge."""
        digest = candidate_hash(source)
        if self.budget.off or digest in self.done:
            return None, []
        self.done.add(digest)
        tuning, screened = tune(self.problem, source, self.device, self.policy, self.executor, self.budget, self.say)
        if not tuning.rows and not tuning.error:
            return None, []
        self.seconds += tuning.seconds
        if self.recorder.stopped:
            return None, []
        parent = find_candidate_id(self.recorder.sessions, self.problem, digest, self.recorder.run_id)
        for variant, evaluation in screened:  # each variant in the store, with its parent; no result of its own
            record_candidate(self.recorder.sessions, self.problem, variant.source, candidate_hash(variant.source),
                             self.recorder.run_id, f"tune:{variant.label}", round=round_, slot=slot, parent_id=parent)
        self._save_table(round_, slot, tuning)
        heading = (f"tuning of candidate {slot + 1} (screened: one short timing each, for ranking only; "
                   f"{len(tuning.rows)} variants, {tuning.seconds:.1f} s)")
        lines = [heading + ":" if tuning.rows else heading] + [f"tuned {line}" for line in tuning.table()]
        if tuning.winner is None:
            return None, lines + (["tuning kept the default (no variant beat it clearly)"] if tuning.rows else [])
        self.say(f"round {round_ + 1}: tuning chose {tuning.winner.label}; evaluating it with the full protocol")
        evaluation = self._full(tuning.winner.source)
        if evaluation is None:
            return None, lines
        if not self.recorder.stopped:
            record_evaluation(self.recorder.sessions, self.problem, tuning.winner.source, evaluation,
                              run_id=self.recorder.run_id, origin=f"tune:{tuning.winner.label}", round=round_,
                              slot=slot, parent_id=parent)
        path = self.recorder.folder / "candidates" / f"round{round_ + 1}_candidate{slot + 1}_tuned.py"
        path.write_text(tuning.winner.source)
        result = f"{evaluation.speedup:.2f}x" if evaluation.accepted and evaluation.speedup else evaluation.verdict
        lines.append(f"tuned {tuning.winner.label} by the full protocol: {result}")
        return Tuned(tuning.winner.source, evaluation, tuning.winner.label, str(path)), lines

    def _full(self, source: str) -> Evaluation | None:
        known = self.recorder.known_evaluation(candidate_hash(source))
        if known is not None:  # resumed
            return known
        evaluation = self.executor.submit(EvalTask(self.problem.key, self.problem, source, self.device,
                                                   self.policy)).result()
        return None if evaluation.screened else evaluation  # an executor that ignored the tier is no full result

    def _save_table(self, round_: int, slot: int, tuning: Tuning) -> None:
        folder: Path = self.recorder.folder / "tuning"
        folder.mkdir(parents=True, exist_ok=True)
        data = {"rows": [asdict(row) for row in tuning.rows], "winner": tuning.winner.label if tuning.winner else None,
                "seconds": round(tuning.seconds, 3), "tier": "screening"}
        (folder / f"round{round_ + 1}_candidate{slot + 1}.json").write_text(json.dumps(data, indent=1))
