"""`kernelwright sweep`: select problems, start or resume the sweep run, pick the executor, summarize."""

from __future__ import annotations

import random
import shlex
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Callable

from agent.config import OptimizeConfig
from agent.run_spec import Execution, ModelSpec, SweepConfig, SweepSpec
from harness.policy import EvalPolicy
from harness.device import device_notice, resolve_device
from harness.execution.eval_task import Executor, ExecutorUnavailable
from harness.execution.executor import default_workers, open_executor
from harness.paths import home
from kernelbench.problem import Problem, load_problems
from kernelbench.shrink import shrink_problem
from kernelwright.eval_service import SHRINK_HINT, UsageError, unallocatable
from kernelwright.interrupts import RunInterrupted, stop_on_ctrl_c
from kernelwright.optimize_service import build_models, check_prices, unpriced
from store import open_store, store_location
from store import runs as run_store
from store import sweep_queries as queries
from sweeps.sweep import Sweep, ensure_baselines, sweep_summary


def sweep_config(execution: Execution, solutions: Path | None, rounds: int, candidates: str | None,
                 timeout_s: float, build_timeout_s: float, baselines: bool, profile: bool,
                 shrink: bool, *, patience: int | None = None, max_tokens: int | None = None,
                 budget_usd: float | None = None, timing_budget_s: float | None = None) -> SweepConfig:
    """What `kernelwright sweep` was asked to do: verify the solutions in a folder, or optimize each problem (the
    execution settings serve both the sweep and each problem's optimize run; `patience` is each run's, the
    budgets the whole sweep's)."""
    policy = EvalPolicy(timeout_s=timeout_s, build_timeout_s=build_timeout_s,
                        **({"timing_budget_s": timing_budget_s} if timing_budget_s is not None else {}))
    each = {"patience": patience} if patience is not None else {}
    optimize = None if solutions else OptimizeConfig(**execution.model_dump(), rounds=rounds,
                                                     candidates=per_round(candidates), policy=policy, **each)
    return SweepConfig(mode="candidates" if solutions else "optimize",
                       candidates_dir=str(solutions) if solutions else None, **execution.model_dump(),
                       baselines=baselines, profile=profile, policy=policy, optimize=optimize, shrink=shrink,
                       budget_usd=budget_usd, max_tokens=max_tokens)


def per_round(candidates: str | None) -> int:
    """`sweep --candidates` is the number per round, as in `optimize`; a folder of solutions is --solutions."""
    if candidates is None:
        return 1
    if candidates.isdigit() and int(candidates) >= 1:
        return int(candidates)
    raise UsageError(f"--candidates {candidates!r}: it is the number of candidates per round (as in optimize); to "
                     f"verify a folder of solutions use --solutions {candidates}")


def select_problems(path: Path, levels: set[int] | None, filters: list[str] | None, limit: int | None,
                    sample: int | None, seed: int, shrink: bool) -> list[Problem]:
    problems = load_problems(path, levels)
    if filters:  # an id, a name, a `<id>_<Name>` stem or a key, each may be a glob (`*ReLU*`)
        problems = [p for p in problems if any(_matches(p, wanted) for wanted in filters)]
    if sample is not None:
        problems = sorted(random.Random(seed).sample(problems, min(sample, len(problems))), key=problems.index)
    if limit is not None:
        problems = problems[:limit]
    if not problems:
        raise UsageError(f"no problems in {path} match the filters")
    return [shrink_problem(p).problem for p in problems] if shrink else problems


def problems_to_sweep(resume: str | None, path: Path, levels: set[int] | None, filters: list[str] | None,
                      limit: int | None, sample: int | None, seed: int, shrink: bool) -> list[Problem] | None:
    """The selected problems of a new sweep; None when resuming (a resumed sweep keeps its own)."""
    return None if resume else select_problems(path, levels, filters, limit, sample, seed, shrink)


def device_name(device: str) -> str:
    """The processor or GPU a sweep runs on, stored with its config."""
    import os
    import platform

    if device == "cuda":
        import torch

        return torch.cuda.get_device_name(0)
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"


def _matches(problem: Problem, wanted: str) -> bool:
    """Plain names match in any case; globs match case-sensitively (`*Max*` must not pick Softmax)."""
    texts = (problem.name, problem.key, f"{problem.problem_id}_{problem.name}")
    if wanted == str(problem.problem_id):
        return True
    if any(ch in wanted for ch in "*?["):
        return any(fnmatchcase(text, wanted) for text in texts)
    return any(text.lower() == wanted.lower() for text in texts)


def _run(sweep: Sweep, config: SweepConfig, models: ModelSpec, executor: Executor) -> None:
    if config.mode == "optimize":
        coder, judge = build_models(models)
        sweep.unpriced_models = unpriced((coder, judge))
        sweep.run_optimize(models, coder, judge, home(), executor, config.workers or default_workers(config.device))
    else:
        sweep.run_candidates(executor)


def _mark_interrupted(sessions: Any, run_id: str, sweep: Sweep) -> None:
    run_store.set_run_status(sessions, run_id, "interrupted")
    for recorder in sweep.recorders:
        run_store.set_run_status(sessions, recorder.run_id, "interrupted")


def _resume_command(run_id: str, db_url: str | None) -> str:
    return " ".join(["kernelwright", "sweep", "--resume", run_id] + (["--db", shlex.quote(db_url)] if db_url else []))


def _budget_note(sweep: Sweep, summary: dict[str, Any], db_url: str | None) -> str | None:
    """What a sweep stopped by its budget left, and how to go on."""
    spent = sweep.budget_spent
    if spent is None:
        return None
    left = sum(1 for p in summary["problems"] if p["status"] == "not_started")
    return (f"sweep budget spent ({spent.amount}): {left} problem{'s' if left != 1 else ''} not started; go on with "
            f"a larger budget: {_resume_command(sweep.run_id, db_url)} {spent.option} N")


def _refuse_unallocatable(problems: list[Problem], device: str, memory_limit_mb: int) -> None:
    """Problems too large for this machine (at their own sizes, on the CPU): one error before the sweep starts."""
    reasons = [r for r in (unallocatable(p, device, memory_limit_mb) for p in problems) if r]
    if reasons:
        raise UsageError(f"{len(reasons)} of {len(problems)} problems cannot be allocated here, e.g. {reasons[0]}: "
                         f"{SHRINK_HINT}")


def _executor(config: SweepConfig) -> Executor:
    try:
        return open_executor(config.executor, config.device, config.workers, config.ray_address)
    except ExecutorUnavailable as exc:
        raise UsageError(str(exc)) from None


def run_sweep(problems: list[Problem] | None, config: SweepConfig, models: ModelSpec, db_url: str | None,
              resume: str | None = None, progress: Callable[[str], None] | None = None,
              executor: Executor | None = None) -> dict[str, Any]:
    """Start a sweep over `problems`, or with `resume` continue one from its stored SweepSpec (model options given
    in `models`, and budgets given in `config`, replace the stored ones); the summary of the finished sweep, or of
    the problems it started before its budget was spent (status `budget_usd` or `max_tokens`)."""
    sessions = open_store(db_url, create=not resume)
    if resume:
        run_id, spec, models = _resumed(sessions, resume, models, config, progress)
        problems = queries.stored_problems(sessions, spec.fingerprints)
    else:
        if not problems:
            raise UsageError("give a problem folder (or --resume RUN_ID)")
        run_id, spec = _started(sessions, problems, config, models, progress)
    config = spec.sweep
    if progress:
        progress(f"sweep {run_id}: {len(problems)} problems on {config.device} ({config.mode}), "
                 f"{config.executor} executor, store {store_location(db_url)}")
    sweep = Sweep(sessions, run_id, problems, config, progress)
    executor = executor or _executor(config)
    try:
        with stop_on_ctrl_c(sweep.stop):
            _run(sweep, config, models, executor)
    except KeyboardInterrupt:
        _mark_interrupted(sessions, run_id, sweep)
        raise RunInterrupted(run_id, _resume_command(run_id, db_url)) from None
    finally:
        executor.shutdown()
    if config.baselines:
        ensure_baselines(sessions, problems, config.device, config.policy, progress)
    run_store.set_run_status(sessions, run_id, sweep.budget_spent.status if sweep.budget_spent else "finished")
    summary = sweep_summary(sessions, run_id)
    note = _budget_note(sweep, summary, db_url)
    if note and progress:
        progress(note)
    return summary


def _resumed(sessions: Any, run_id: str, given: ModelSpec, config: SweepConfig,
             progress: Callable[[str], None] | None) -> tuple[str, SweepSpec, ModelSpec]:
    """A stored sweep, marked running again, with its models (options given now replace the stored ones) and its
    budgets (`config`'s, where given, replace the stored ones: a sweep that spent its budget goes on with more)."""
    run = run_store.get_run(sessions, run_id)
    if run is None or run.kind != "sweep":
        raise UsageError(f"no sweep run {run_id!r} in this store (see `kernelwright runs list`)")
    spec = SweepSpec.from_stored(run.config)
    budgets = {name: value for name, value in (("budget_usd", config.budget_usd), ("max_tokens", config.max_tokens))
               if value is not None}
    spec = spec.model_copy(update={"sweep": spec.sweep.model_copy(update=budgets)})
    models = (spec.models or ModelSpec(model=run.model)).overridden_by(given)
    if spec.sweep.mode == "optimize":
        check_prices(build_models(models), spec.sweep.budget_usd, progress)  # before the run is touched
    if budgets:
        run_store.set_run_config(sessions, run_id, sweep=spec.sweep.model_dump())
    run_store.set_run_status(sessions, run_id, "running")
    return run_id, spec, models


def _started(sessions: Any, problems: list[Problem], config: SweepConfig, models: ModelSpec,
             progress: Callable[[str], None] | None) -> tuple[str, SweepSpec]:
    """A new sweep run, stored with its spec once the device, the solutions folder, the problems' sizes and the
    models' endpoint are known to work (a usage error leaves no run behind)."""
    device = resolve_device(config.device)
    notice = device_notice(config.device, device)
    if notice and progress:
        progress(notice)
    optimize = config.optimize.model_copy(update={"device": device}) if config.optimize else None
    config = config.model_copy(update={"device": device, "optimize": optimize, "device_requested": config.device,
                                       "device_name": device_name(device), "problem_keys": [p.key for p in problems]})
    if config.mode == "candidates" and not (config.candidates_dir and Path(config.candidates_dir).is_dir()):
        raise UsageError(f"--solutions {config.candidates_dir}: not a folder")
    _refuse_unallocatable(problems, device, config.policy.memory_limit_mb)
    queries.add_problems(sessions, problems)
    optimizing = config.mode == "optimize"
    if optimizing:  # a bad endpoint, or a dollar budget for a model without a price: a usage error first
        check_prices(build_models(models), config.budget_usd, progress)
    spec = SweepSpec(sweep=config, fingerprints=[p.fingerprint for p in problems],
                     models=models.frozen() if optimizing else None)
    return run_store.create_run(sessions, "sweep", models.coder if optimizing else None, spec.model_dump()), spec
