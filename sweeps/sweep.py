"""`kernelwright sweep`: every problem of a folder, either re-verifying existing solutions (`--solutions DIR`)
or optimizing each with a model. Resumable: a problem's row is marked done only when its result is stored, so
a killed sweep loses nothing finished and restarts the unfinished problems cleanly."""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future, as_completed
from pathlib import Path
from typing import Any, Callable, NamedTuple

from sqlalchemy.orm import Session, sessionmaker

from agent.config import OptimizeConfig
from agent.llm import ChatModel
from agent.loop import Optimizer
from agent.recorder import RunRecorder
from agent.run_spec import ModelSpec, ProblemRef, RunSpec, SweepConfig, SweepSpec
from harness.policy import EvalPolicy
from harness.records import Evaluation, Unjudged, Verdict
from harness.execution.eval_task import EvalTask, Executor, own_seconds
from harness.execution.profile import kernels_of
from kernelbench.matching import solutions_by_problem
from kernelbench.problem import Problem
from reports.metrics import by_level
from reports.run_report import clip
from reports.speedups import NO_SPEEDUP_FOUND, faster, speedup_cell
from reports.speedups import measured as measured_speedup
from store import BaselineRow, SweepItemRow, record_evaluation
from store import runs as run_store
from store import sweep_queries as queries

Progress = Callable[[str], None]


class Sweep:
    """One sweep run over its problems: candidates mode verifies a solution per problem, optimize mode runs the
    agent on several problems at once; each problem's row is marked as it finishes."""

    def __init__(self, sessions: sessionmaker[Session], run_id: str, problems: list[Problem], config: SweepConfig,
                 progress: Progress | None = None) -> None:
        self.sessions, self.run_id, self.problems, self.config = sessions, run_id, problems, config
        self.say = progress or (lambda _m: None)
        self.started = time.perf_counter()
        self.finished = 0
        self.lock = threading.Lock()
        self.stopped = False  # Ctrl-C: nothing reported afterwards is recorded
        self.recorders: list[RunRecorder] = []
        self.budget_spent: BudgetSpent | None = None  # why problems were left unstarted
        self.unpriced_models: list[str] = []  # stored with each optimize run: its cost is unknown

    def pending(self) -> list[Problem]:
        done = {key for key, row in queries.sweep_items(self.sessions, self.run_id).items() if row.status == "done"}
        return [p for p in self.problems if p.key not in done]

    def stop(self) -> None:
        with self.lock:
            self.stopped = True
            for recorder in self.recorders:
                recorder.stopped = True

    def _report(self, problem: Problem, verdict: str, speedup: float | None, total: int) -> None:
        """One progress line: this problem's verdict and speedup with its interval, and the best result so far
        (only a significantly faster kernel is one)."""
        with self.lock:
            self.finished += 1
        elapsed = time.perf_counter() - self.started
        rows = list(queries.sweep_items(self.sessions, self.run_id).values())
        failed = sum(1 for r in rows if r.status == "done" and r.verdict != Verdict.ACCEPTED)
        measured = queries.timings(self.sessions, [r.evaluation_id for r in rows if r.evaluation_id is not None])
        timing = {r.problem_key: measured.get(r.evaluation_id, {}) for r in rows if r.evaluation_id is not None}

        def interval(key: str) -> tuple[Any, Any]:
            return timing.get(key, {}).get("speedup_ci"), timing.get(key, {}).get("speedup_significant")

        wins = [r for r in rows if r.verdict == Verdict.ACCEPTED and faster(r.speedup, *interval(r.problem_key))]
        best = max(wins, key=lambda r: r.speedup or 0.0, default=None)
        eta = elapsed / self.finished * (total - self.finished)
        cost = run_store.spend(self.sessions, self.run_id)["cost_usd"]
        this = f" {speedup_cell(speedup, *interval(problem.key))}" if speedup else ""
        self.say(f"[{self.finished}/{total}] {problem.key}: {verdict}{this} | failed {failed} | best "
                 f"{measured_speedup(best.speedup, interval(best.problem_key)[0]) if best else NO_SPEEDUP_FOUND} | "
                 f"spent {'unknown' if cost is None else f'${cost:.4f}'} | ETA {eta:.0f} s")

    def run_candidates(self, executor: Executor) -> None:
        root = Path(self.config.candidates_dir or ".")
        solutions = solutions_by_problem(self.problems, root)
        pending = self.pending()
        futures: dict[Future[Evaluation], tuple[Problem, str]] = {}
        for problem in pending:
            file = solutions.get(problem.key)
            if file is None:
                queries.mark_item(self.sessions, self.run_id, problem, status="done", verdict=Unjudged.MISSING.value,
                      detail=f"no solution in {root} matches this problem")
                self._report(problem, Unjudged.MISSING.value, None, len(pending))
                continue
            queries.mark_item(self.sessions, self.run_id, problem, status="running", detail=str(file))
            source = file.read_text()
            task = EvalTask(problem.key, problem, source, self.config.device, self.config.policy)
            futures[executor.submit(task)] = (problem, source)
        for future in as_completed(futures):
            problem, source = futures[future]
            try:
                evaluation = future.result()
            except Exception as exc:  # a broken problem (its reference fails) must not stop the sweep
                if self.stopped:
                    raise KeyboardInterrupt from None
                queries.mark_item(self.sessions, self.run_id, problem, status="done", verdict=Unjudged.PROBLEM_ERROR.value, detail=str(exc))
                self._report(problem, Unjudged.PROBLEM_ERROR.value, None, len(pending))
                continue
            if self.stopped:  # killed under it by Ctrl-C: no verdict on the kernel
                raise KeyboardInterrupt
            if self.config.profile and evaluation.accepted and evaluation.device == "cuda":
                task = EvalTask(problem.key, problem, source, self.config.device, self.config.policy)
                evaluation.metrics = executor.profile(task, kernels_of(evaluation)).result()
            evaluation_id = record_evaluation(self.sessions, problem, source, evaluation, run_id=self.run_id,
                                              origin=self.config.candidates_dir)
            queries.mark_item(self.sessions, self.run_id, problem, status="done", verdict=evaluation.verdict.value,
                  speedup=evaluation.speedup, evaluation_id=evaluation_id, wall_s=own_seconds(evaluation),
                  candidate_ms=evaluation.candidate_ms,
                  detail=clip((evaluation.reasons or [""])[0], 2000))
            self._report(problem, evaluation.verdict.value, evaluation.speedup, len(pending))

    def run_optimize(self, models: ModelSpec, coder: ChatModel, judge: ChatModel, runs_root: Path,
                     executor: Executor, concurrency: int) -> None:
        """Up to `concurrency` problems are optimized at once; all their candidates share one executor (so
        builds overlap and timing stays one at a time). Once the sweep's budget is spent no further problem
        starts (`budget_spent` says why)."""
        assert self.config.optimize is not None
        items = queries.sweep_items(self.sessions, self.run_id)
        pending = self.pending()
        calls = [lambda p=problem: self._optimize_guarded(p, items.get(p.key), models, coder, judge, runs_root,
                                                          executor, len(pending)) for problem in pending]
        try:
            for future in as_completed(_in_daemon_threads(calls, concurrency, lambda: self.stopped)):
                future.result()
        except BaseException:
            self.stop()
            raise

    def _optimize_guarded(self, problem: Problem, *args: Any) -> None:
        try:
            self._optimize_one(problem, *args)
        except Exception as exc:  # a broken problem (its reference fails) must not stop the sweep
            if self.stopped:
                return
            queries.mark_item(self.sessions, self.run_id, problem, status="done", verdict=Unjudged.PROBLEM_ERROR.value, detail=str(exc))
            self._report(problem, Unjudged.PROBLEM_ERROR.value, None, args[-1])

    def _optimize_one(self, problem: Problem, item: SweepItemRow | None, models: ModelSpec, coder: ChatModel,
                      judge: ChatModel, runs_root: Path, executor: Executor, total: int) -> None:
        if self.stopped:
            return
        resumed = item.child_run_id if item is not None else None  # interrupted mid-optimize: resume that run
        config = self._within_budget(resumed)
        if config is None:
            self._not_started(problem)
            return
        if resumed:
            recorder = RunRecorder.resume(self.sessions, resumed, runs_root)
        else:
            spec = RunSpec(problem=ProblemRef(key=problem.key, fingerprint=problem.fingerprint), models=models,
                           optimize=config)
            recorder = RunRecorder.start(self.sessions, problem, spec, runs_root)
            queries.mark_item(self.sessions, self.run_id, problem, status="running", child_run_id=recorder.run_id)
            if self.unpriced_models:
                run_store.set_run_config(self.sessions, recorder.run_id, unpriced_models=self.unpriced_models)
        with self.lock:
            self.recorders.append(recorder)
            recorder.stopped = self.stopped
        result = Optimizer(problem, coder, judge, config, recorder, executor).run()
        if self.stopped:
            return
        summary = recorder.finish(result)
        best = summary["best"]
        verdict = best["verdict"] if best else _failure_of(result)
        queries.mark_item(self.sessions, self.run_id, problem, status="done", verdict=verdict,
              speedup=best["speedup"] if best else None, wall_s=summary["seconds"]["wall"],
              candidate_ms=result.best.attempt.candidate_ms if result.best else None,
              cost_usd=summary["cost_usd"], detail=result.message or summary["folder"],
              evaluation_id=queries.best_evaluation_id(self.sessions, recorder.run_id) if best else None)
        self._report(problem, verdict, best["speedup"] if best else None, total)

    def _within_budget(self, resumed: str | None) -> OptimizeConfig | None:
        """The next problem's optimize settings, its budgets what the sweep has left (plus what `resumed`, the
        run it resumes, already spent); None once the sweep's budget is spent."""
        assert self.config.optimize is not None
        spent = run_store.totals(self.sessions, self.run_id)
        own = run_store.totals(self.sessions, resumed) if resumed else {"cost_usd": 0.0, "prompt_tokens": 0,
                                                                        "completion_tokens": 0}
        budgets = self._budgets_left(spent)
        if budgets is None:
            return None
        if "budget_usd" in budgets:
            budgets["budget_usd"] += own["cost_usd"]
        if "max_tokens" in budgets:
            budgets["max_tokens"] += own["prompt_tokens"] + own["completion_tokens"]
        return self.config.optimize.model_copy(update=budgets)

    def _budgets_left(self, spent: dict[str, Any]) -> dict[str, Any] | None:
        """What is left of the sweep's budgets after `spent`; None (and `budget_spent` set) when one is spent."""
        left: dict[str, Any] = {}
        tokens = spent["prompt_tokens"] + spent["completion_tokens"]
        if self.config.budget_usd is not None:
            if spent["cost_usd"] >= self.config.budget_usd:
                self._spent(BudgetSpent("budget_usd", "--budget-usd",
                                        f"${spent['cost_usd']:.4f} of ${self.config.budget_usd:g}"))
                return None
            left["budget_usd"] = self.config.budget_usd - spent["cost_usd"]
        if self.config.max_tokens is not None:
            if tokens >= self.config.max_tokens:
                self._spent(BudgetSpent("max_tokens", "--max-tokens", f"{tokens} of {self.config.max_tokens} tokens"))
                return None
            left["max_tokens"] = self.config.max_tokens - tokens
        return left

    def _spent(self, spent: "BudgetSpent") -> None:
        """Note the first budget found spent, and say so once."""
        with self.lock:
            first, self.budget_spent = self.budget_spent is None, self.budget_spent or spent
        if first:
            self.say(f"sweep budget spent ({spent.amount}): no further problem starts")

    def _not_started(self, problem: Problem) -> None:
        assert self.budget_spent is not None
        queries.mark_item(self.sessions, self.run_id, problem, status="not_started",
                          detail=f"not started: the sweep's budget was spent ({self.budget_spent.amount})")


class BudgetSpent(NamedTuple):
    """Why a sweep started no further problem: its status (`budget_usd`, `max_tokens`), the option that set the
    budget and what was spent of it."""

    status: str
    option: str
    amount: str


def _in_daemon_threads(calls: list[Callable[[], None]], limit: int, stopped: Callable[[], bool]) -> list[Future[None]]:
    """Run `calls`, `limit` at a time, in daemon threads: on Ctrl-C the sweep exits without waiting for LLM
    replies nobody will record. Calls not started when `stopped()` turns true are cancelled."""
    futures: list[Future[None]] = [Future() for _ in calls]
    work: queue.SimpleQueue[int] = queue.SimpleQueue()
    for index in range(len(calls)):
        work.put(index)

    def worker() -> None:
        while True:
            try:
                index = work.get_nowait()
            except queue.Empty:
                return
            if stopped() or not futures[index].set_running_or_notify_cancel():
                futures[index].cancel()
                continue
            try:
                futures[index].set_result(calls[index]())
            except BaseException as exc:  # handed to the waiting caller
                futures[index].set_exception(exc)

    for _ in range(max(1, min(limit, len(calls)))):
        threading.Thread(target=worker, daemon=True, name="kernelwright-problem").start()
    return futures


def ensure_baselines(sessions: sessionmaker[Session], problems: list[Problem], device: str, policy: EvalPolicy,
                     progress: Progress | None = None) -> None:
    """Measure eager and torch.compile timings for problems that have none on this device yet."""
    from harness.execution.baseline import device_key, measure_baselines

    key = device_key(device, policy.cpu_threads)
    for problem in problems:
        if queries.baseline(sessions, problem.fingerprint, key) is not None:
            continue
        if progress:
            progress(f"baselines for {problem.key} (eager, torch.compile)")
        queries.add_baseline(sessions, problem.fingerprint, key, measure_baselines(problem, device, policy))


FAILURE_ORDER = (Verdict.INCORRECT, Verdict.RUNTIME_ERROR, Verdict.COMPILE_ERROR, Verdict.REJECTED, Verdict.TIMEOUT,
                 Verdict.CRASH)


def _failure_of(result: Any) -> str:
    """The outcome that best describes a problem with no accepted kernel: its most telling harness verdict, else
    why no kernel reached the harness."""
    verdicts = [o.attempt.verdict for o in result.outcomes]
    for verdict in FAILURE_ORDER:
        if verdict in verdicts:
            return verdict.value
    return Unjudged.UNPARSEABLE.value if Unjudged.UNPARSEABLE in verdicts else Unjudged.LLM_ERROR.value


def sweep_summary(sessions: sessionmaker[Session], run_id: str) -> dict[str, Any]:
    run = run_store.get_run(sessions, run_id)
    spec = SweepSpec.from_stored(run.config if run else None)
    items = list(queries.sweep_items(sessions, run_id).values())
    order = {key: i for i, key in enumerate(spec.sweep.problem_keys)}
    items.sort(key=lambda r: order.get(r.problem_key, len(order)))
    shrunk = queries.shrink_notes(sessions, [r.problem_ref for r in items])
    timings = queries.timings(sessions, [r.evaluation_id for r in items if r.evaluation_id is not None])
    problems = [{"name": r.problem_key, "level": r.level, "shrunk": shrunk.get(r.problem_ref), "status": r.status,
                 **timings.get(r.evaluation_id, {"ref_ms": None, "speedup_ci": None, "speedup_significant": None}),
                 "best": None if r.status != "done" or r.verdict is None or r.verdict in UNJUDGED
                 else {"verdict": r.verdict, "speedup": r.speedup},
                 "verdict": r.verdict, "speedup": r.speedup, "wall_s": round(r.wall_s, 2), "cost_usd": r.cost_usd,
                 "detail": r.detail, "child_run_id": r.child_run_id, "candidate_ms": r.candidate_ms} for r in items]
    finished = [p for p in problems if p["status"] == "done"]
    summary = {"run_id": run_id, "status": run.status if run else "unknown", "problems": problems,
               "metrics": by_level(finished), **run_store.spend(sessions, run_id)}
    if spec.sweep.baselines:
        from harness.execution.baseline import device_key

        fingerprints = dict(zip(spec.sweep.problem_keys, spec.fingerprints))
        baselines = queries.baselines(sessions, fingerprints, device_key(spec.sweep.device,
                                                                         spec.sweep.policy.cpu_threads))
        for problem in problems:
            row = baselines.get(problem["name"])
            problem["baseline"] = None if row is None else {
                "eager_ms": row.eager_ms, "compile_ms": row.compile_ms, "errors": row.errors,
                "compile_speedup": row.compile_speedup, "compile_speedup_ci": row.compile_speedup_ci,
                "max_autotune": (row.timing or {}).get("max_autotune")}
        summary["metrics_vs_compile"] = by_level(_against_compile(finished, baselines))
    return summary


UNJUDGED = {u.value for u in Unjudged}


def _against_compile(problems: list[dict[str, Any]], baselines: dict[str, BaselineRow]) -> list[dict[str, Any]]:
    """The same results with speedup = torch.compile time / candidate time (no baseline: not counted faster)."""
    rows = []
    for p in problems:
        row = baselines.get(p["name"])
        accepted = p["verdict"] == Verdict.ACCEPTED
        speedup = (row.compile_ms / p["candidate_ms"]) if row and row.compile_ms and p.get("candidate_ms") else None
        rows.append({**p, "speedup": speedup if accepted else None,
                     "verdict": p["verdict"] if speedup or not accepted else NO_BASELINE})
    return rows


NO_BASELINE = Unjudged.NO_BASELINE
