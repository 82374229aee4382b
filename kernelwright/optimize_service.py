"""`kernelwright optimize`: build the models, start or resume a run, drive the loop, leave the artifacts."""

from __future__ import annotations

import json
import shlex
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from agent.config import OptimizeConfig
from agent.llm import ChatModel
from agent.loop import Optimizer
from agent.openai_client import OpenAIChatModel, OpenAIConfig
from agent.pricing import PRICE_FORMAT, PriceTable
from agent.recorder import RunRecorder, stored_problem, stored_spec
from agent.run_spec import DEFAULT_MODEL, Execution, ModelSpec, ProblemRef, RunSpec
from agent.scripted import ScriptedModel
from harness.policy import EvalPolicy
from harness.device import DeviceError, resolve_device
from harness.execution.eval_task import Executor, ExecutorUnavailable
from harness.execution.executor import open_executor
from harness.paths import home
from kernelbench.problem import Problem
from kernelbench.shrink import describe_changes
from kernelwright.eval_service import UsageError, cost_note, refuse_unallocatable, target_problem
from kernelwright.interrupts import RunInterrupted, stop_on_ctrl_c
from kernelwright.runs_service import best_evaluation, speedup_found
from store import open_store, store_location
from store.browse import run_evaluations
from store import runs as run_store


Progress = Callable[[str], None]
OP_BUCKET_SAMPLES = 2  # the op beside best.py: its bucket's corners, a prime and a non-multiple of 8 (export-op: 4)


REASONING_EFFORTS = ("low", "medium", "high")
CONTRACTS = ("auto", "file", "kernel")


def model_spec(prices: str | None = None, **options: Any) -> ModelSpec:
    """The models a command was given (`options`: ModelSpec's fields, each None where not given)."""
    effort = options.get("reasoning_effort")
    if effort not in (None, *REASONING_EFFORTS):
        raise UsageError(f"--reasoning-effort {effort!r}: choose low, medium or high")
    return ModelSpec(prices=prices, **options)


def optimize_config(execution: Execution, **settings: Any) -> OptimizeConfig:
    """An optimize run's config: where it runs (shared with sweeps) and its rounds and budgets (`settings`)."""
    from agent.search.tuning import TuneBudget

    try:
        TuneBudget.parse(settings.get("tune_budget", "8"))
    except ValueError as exc:
        raise UsageError(f"--tune-budget: {exc}") from None
    if settings.get("search", "greedy") not in ("greedy", "population"):
        raise UsageError(f"--search {settings['search']!r}: choose greedy or population")
    timing_budget_s = settings.pop("timing_budget_s", None)
    if timing_budget_s is not None:
        settings["policy"] = EvalPolicy(timing_budget_s=timing_budget_s)
    if settings.get("contract", "auto") not in CONTRACTS:
        raise UsageError(f"--contract {settings['contract']!r}: choose {', '.join(CONTRACTS)}")
    return OptimizeConfig(**execution.model_dump(), **settings)


def build_model(name: str | None, options: ModelSpec) -> ChatModel:
    if name and name.startswith("scripted:"):
        try:
            return ScriptedModel(Path(name.removeprefix("scripted:")))
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    try:
        prices = _prices(options.prices)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    limits = {"timeout_s": options.llm_timeout} if options.llm_timeout else {}
    config = OpenAIConfig(model=name or DEFAULT_MODEL, base_url=options.base_url, api_key_env=options.key_variable,
                          temperature=options.temperature, reasoning_effort=options.reasoning_effort,
                          reply_tokens=options.reply_tokens, **limits)
    from agent.openai_client import ConfigError

    try:
        return OpenAIChatModel(config, prices)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def build_models(models: ModelSpec) -> tuple[ChatModel, ChatModel]:
    """(coder, judge): the judge is the coder unless a judge model is named."""
    coder = build_model(models.model, models)
    return coder, build_model(models.judge_model, models) if models.judge_model else coder


def unpriced(models: tuple[ChatModel, ...]) -> list[str]:
    """Names of the models whose calls have no price (their cost is unknown, never $0)."""
    names: list[str] = []
    for model in models:
        table = getattr(model, "prices", None)
        if isinstance(table, PriceTable) and not table.known(model.name) and model.name not in names:
            names.append(model.name)
    return names


def check_prices(models: tuple[ChatModel, ...], budget_usd: float | None, progress: Progress | None) -> list[str]:
    """Refuse a dollar budget that cannot be kept (a model without a price); name unpriced models up front."""
    missing = unpriced(models)
    if missing and budget_usd is not None:
        raise UsageError(f"--budget-usd needs a price for {', '.join(missing)}: give one with --prices FILE "
                         f"(JSON: {PRICE_FORMAT}, USD per 1M tokens) or KERNELWRIGHT_PRICES, or drop --budget-usd "
                         "and use --max-tokens")
    if missing and progress:
        progress(f"no price for {', '.join(missing)}: its cost is reported as unknown (add a price with --prices "
                 "FILE)")
    return missing


def _prices(prices: str | None) -> PriceTable:
    """A price file's path (as given), or its JSON content (as stored with a run)."""
    if prices and prices.lstrip().startswith("{"):
        table = PriceTable()
        try:
            table.prices.update({name: (float(v["input"]), float(v["output"])) for name, v in json.loads(prices).items()})
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"stored price table: {exc}") from None
        return table
    return PriceTable(prices)


def run_optimize(problem_spec: str | None, config: OptimizeConfig, models: ModelSpec, db_url: str | None,
                 resume: str | None = None, progress: Progress | None = None,
                 executor: Executor | None = None, shrink: bool = False) -> dict[str, Any]:
    """Start a run, or with `resume` continue one from its stored spec (options given in `models` replace the
    stored ones; budgets and policy are the run's own). `shrink` rescales the problem to the CPU budget first
    (the stored problem is the shrunk one, marked as such, so a resumed run goes on with it)."""
    started = time.perf_counter()
    sessions = open_store(db_url, create=not resume)
    if resume:
        stored_run = stored_spec(sessions, resume)
        problem = stored_problem(sessions, stored_run, resume)
        if problem_spec and _problem(problem_spec, shrink, None).fingerprint != problem.fingerprint:
            raise UsageError(f"run {resume} optimizes {problem.label}, not {problem_spec}"
                             f"{'' if shrink or not problem.shrunk else ' (add --shrink)'}")
        given = stored_run.models.overridden_by(models)
        coder, judge = build_models(given)  # a bad endpoint or budget leaves the run as it was
        missing = check_prices((coder, judge), stored_run.optimize.budget_usd, progress)
        recorder = RunRecorder.resume(sessions, resume, home())
        replay_point = (run_store.get_run(sessions, resume).config or {}).get(REPLAY_KEY)
        if replay_point:  # a resumed rerun keeps drawing on its original's exemplars
            recorder = _replaying(recorder, datetime.fromisoformat(replay_point))
        recorder.spec = recorder.spec.model_copy(update={"models": given})
    else:
        if not problem_spec:
            raise UsageError("give a PROBLEM (a file or a bundled problem name), or --resume RUN_ID")
        config = config.model_copy(update={"device": _runnable_device(config.device, progress)})
        problem = _problem(problem_spec, shrink, progress)
        refuse_unallocatable(problem, config.device, config.policy.memory_limit_mb)
        note = cost_note(problem, config.device, config.policy)
        if note and progress:
            progress(f"{note} (each candidate's evaluation)")
        coder, judge = build_models(models)  # before the run exists: a bad endpoint leaves no empty run behind
        missing = check_prices((coder, judge), config.budget_usd, progress)
        spec = RunSpec(problem=ProblemRef(key=problem.key, fingerprint=problem.fingerprint), models=models,
                       optimize=config)
        recorder = RunRecorder.start(sessions, problem, spec, home())
    _note_unpriced(recorder, missing)
    summary = _with_unknown_cost(_drive(recorder, coder, judge, db_url, progress, executor), missing)
    loop_ended = time.perf_counter()
    summary = _after_the_loop(recorder, summary, problem, db_url, progress)
    return {**summary, "seconds": _command_seconds(summary["seconds"], started, loop_ended)}


def _command_seconds(seconds: dict[str, float], started: float, loop_ended: float) -> dict[str, float]:
    """The loop's split, with `wall` the whole command (setup, loop, envelope and export) and `envelope` the
    part after the loop, so the parts add up to what the user waited."""
    now = time.perf_counter()
    return {**seconds, "loop": seconds.get("wall", 0.0), "envelope": round(now - loop_ended, 3),
            "wall": round(now - started, 3)}


def _after_the_loop(recorder: RunRecorder, summary: dict[str, Any], problem: Problem, db_url: str | None,
                    progress: Progress | None) -> dict[str, Any]:
    """The envelope check and the op export. Ctrl-C here kills their children at once and leaves the run
    `interrupted` with its resume command (resuming runs no round again: it checks and exports the best kernel)."""
    try:
        with stop_on_ctrl_c(lambda: None):
            return _with_envelope(summary, problem, recorder.spec.optimize, progress)
    except KeyboardInterrupt:
        run_store.set_run_status(recorder.sessions, recorder.run_id, "interrupted")
        raise RunInterrupted(recorder.run_id, resume_command(recorder.run_id, db_url)) from None


def _with_envelope(summary: dict[str, Any], problem: Problem, config: OptimizeConfig,
                   progress: Progress | None) -> dict[str, Any]:
    """The best kernel checked at the sizes around the problem's own (correctness only: a few seconds), so the
    user sees where it holds before shipping it (harness/shipping/envelope.py)."""
    from harness.shipping.envelope import check_envelope

    best = summary.get("best")
    if not best or not best.get("path") or not config.policy.envelope or summary.get("status") == "interrupted":
        return summary
    source = Path(best["path"]).read_text()
    envelope = check_envelope(problem, source, config.device, config.policy, timed=0, progress=progress)
    summary = {**summary, "envelope": envelope.model_dump(),
               "envelope_finding": envelope.finding.render() if envelope.finding else None}
    return {**summary, **_exported(problem, source, Path(best["path"]).parent / "op", envelope, config, progress)}


def _exported(problem: Problem, source: str, out_dir: Path, envelope: Any, config: OptimizeConfig,
              progress: Progress | None) -> dict[str, Any]:
    """The best kernel as a drop-in torch.library op beside it (its own test is `python -m PKG.test_op`), with the
    bucket inferred from its envelope where it holds at samples drawn now (kernelwright/export_buckets.py)."""
    from kernelwright.export_buckets import inferred_buckets
    from kernelwright.export_op import ExportError, bucket_line, export_op

    try:
        buckets = inferred_buckets(problem, source, config.device, config.policy, envelope, OP_BUCKET_SAMPLES,
                                   progress)
        exported = export_op(problem, source, out_dir, envelope=envelope, device=config.device, buckets=buckets)
    except ExportError as exc:
        return {"op": None, "op_error": str(exc)}
    return {"op": str(exported.out_dir / exported.package), "op_test": exported.test_command,
            "op_buckets": [bucket_line(b) for b in buckets]}


def _problem(problem_spec: str, shrink: bool, progress: Progress | None) -> Problem:
    problem, shrunk = target_problem(problem_spec, shrink)
    if progress and shrunk is not None:
        progress(f"size reduction: {describe_changes(shrunk.changes)}" if shrunk.changes
                 else f"{problem.key} already fits the CPU budget: its own sizes are used")
    return problem


def _note_unpriced(recorder: RunRecorder, unpriced_models: list[str]) -> None:
    """Stored with the run, so `runs list`, `runs show` and the report say its cost is unknown."""
    if unpriced_models:
        run_store.set_run_config(recorder.sessions, recorder.run_id, unpriced_models=unpriced_models)


def _with_unknown_cost(summary: dict[str, Any], unpriced_models: list[str]) -> dict[str, Any]:
    """A run that called a model without a price has an unknown cost (None), and names that model."""
    if unpriced_models:
        summary = {**summary, "cost_usd": None, "unpriced_models": unpriced_models}
    return summary


class ReplayingRecorder(RunRecorder):
    """A rerun's recorder: its exemplars come from the store as it was when the original run started (plus the
    rerun's own kernels, as the original had its own), so its prompts are the original's, not whatever the store
    has gathered since."""

    exemplars_before: datetime

    def accepted_kernels(self) -> list[tuple[str, float]]:
        return run_store.accepted_in_problem(self.sessions, self.problem, before=self.exemplars_before,
                                             run_id=self.run_id)


REPLAY_KEY = "exemplars_before"  # in a rerun's stored config: the store's state its exemplars come from


def _replaying(recorder: RunRecorder, before: datetime) -> RunRecorder:
    replaying = ReplayingRecorder(recorder.sessions, recorder.run_id, recorder.problem, recorder.folder,
                                  recorder.spec)
    replaying.exemplars_before = before
    return replaying


def _replay_point(sessions: Any, run_id: str) -> datetime | None:
    """When the exemplar pool of `run_id` was taken: a rerun's stored point, else the run's own start."""
    run = run_store.get_run(sessions, run_id)
    if run is None:
        return None
    stored = (run.config or {}).get(REPLAY_KEY)
    return datetime.fromisoformat(stored) if stored else run.created_at


def rerun_optimize(run_id: str, db_url: str | None, progress: Progress | None = None,
                   executor: Executor | None = None, fresh_exemplars: bool = False) -> dict[str, Any]:
    """A new run from `run_id`'s stored spec: the same problem, models, endpoint, sampling, budgets and policy,
    and the exemplars the original run could draw on (`fresh_exemplars`: whatever the store holds now)."""
    sessions = open_store(db_url, create=False)
    spec = stored_spec(sessions, run_id)
    problem = stored_problem(sessions, spec, run_id)
    spec = spec.model_copy(update={"optimize": spec.optimize.model_copy(
        update={"device": _runnable_device(spec.optimize.device, progress)})})
    coder, judge = build_models(spec.models)
    missing = check_prices((coder, judge), spec.optimize.budget_usd, progress)
    before = None if fresh_exemplars else _replay_point(sessions, run_id)
    recorder = RunRecorder.start(sessions, problem, spec, home())
    _note_unpriced(recorder, missing)
    if before is not None:
        run_store.set_run_config(sessions, recorder.run_id, **{REPLAY_KEY: before.isoformat()})
        recorder = _replaying(recorder, before)
    if progress:
        progress(f"re-running {run_id} as a new run" + ("" if before is None else
                 f", with the exemplars the store held at {before:%Y-%m-%d %H:%M:%S} UTC"))
    return _with_unknown_cost(_drive(recorder, coder, judge, db_url, progress, executor), missing)


def _runnable_device(device: str, progress: Progress | None) -> str:
    resolved = resolve_device(device)
    if resolved not in ("cpu", "cuda"):
        raise DeviceError(f"optimize needs a device that runs kernels (cpu or a GPU), not {resolved}")
    return resolved


def _drive(recorder: RunRecorder, coder: ChatModel, judge: ChatModel, db_url: str | None,
           progress: Progress | None, executor: Executor | None) -> dict[str, Any]:
    config = recorder.config
    if progress:
        progress(f"run {recorder.run_id}: {recorder.problem.key} on {config.device}, artifacts in "
                 f"{recorder.folder.resolve()}, store {store_location(db_url)}")
    owned = executor is None
    if executor is None:
        try:
            executor = open_executor(config.executor, config.device, config.workers, config.ray_address)
        except ExecutorUnavailable as exc:
            raise UsageError(str(exc)) from None
    try:
        with stop_on_ctrl_c(lambda: setattr(recorder, "stopped", True)):
            result = Optimizer(recorder.problem, coder, judge, config, recorder, executor, progress).run()
    except KeyboardInterrupt:
        run_store.set_run_status(recorder.sessions, recorder.run_id, "interrupted")
        raise RunInterrupted(recorder.run_id, resume_command(recorder.run_id, db_url)) from None
    finally:
        if owned:
            executor.shutdown()
    summary = recorder.finish(result)
    found = speedup_found(best_evaluation(run_evaluations(recorder.sessions, recorder.run_id)))
    return {**summary, "shrunk": recorder.problem.shrunk, "speedup_found": found}


def resume_command(run_id: str, db_url: str | None) -> str:
    """The command that continues `run_id`: its models and endpoint are stored with it (the key is read from the
    environment again)."""
    words = ["kernelwright", "optimize", "--resume", run_id]
    if db_url:
        words += ["--db", shlex.quote(db_url)]
    return " ".join(words)
