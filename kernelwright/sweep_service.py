"""`kernelwright sweep`: select problems, start or resume the sweep run, pick the executor, summarize."""

from __future__ import annotations

import random
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Callable

from sqlalchemy import select

from harness.device import device_notice, resolve_device
from harness.paths import home
from kernelbench.problem import Problem, load_problems
from kernelbench.shrink import shrink_problem
from kernelwright.eval_service import UsageError
from kernelwright.optimize_service import ModelOptions, build_model
from store import ProblemRow, open_store
from store import runs as run_store
from store.results import upsert_problem
from sweeps.executor import Executor, LocalExecutor
from sweeps.sweep import Sweep, SweepConfig, ensure_baselines, sweep_summary


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


def _matches(problem: Problem, wanted: str) -> bool:
    """Plain names match in any case; globs match case-sensitively (`*Max*` must not pick Softmax)."""
    texts = (problem.name, problem.key, f"{problem.problem_id}_{problem.name}")
    if wanted == str(problem.problem_id):
        return True
    if any(ch in wanted for ch in "*?["):
        return any(fnmatchcase(text, wanted) for text in texts)
    return any(text.lower() == wanted.lower() for text in texts)


def _stored_problems(sessions: Any, fingerprints: list[str]) -> list[Problem]:
    with sessions() as session:
        rows = {r.fingerprint: r for r in session.scalars(select(ProblemRow).where(ProblemRow.fingerprint.in_(fingerprints)))}
    return [Problem(name=r.name, source=r.source, level=r.level, problem_id=r.problem_id, path=r.path)
            for r in (rows[f] for f in fingerprints if f in rows)]


def _executor(config: SweepConfig) -> Executor:
    if config.executor == "ray":
        from sweeps.ray_executor import RayExecutor, RayUnavailable

        try:
            return RayExecutor(config.ray_address, config.device, config.workers)
        except RayUnavailable as exc:
            raise UsageError(str(exc)) from None
    if config.executor != "local":
        raise UsageError(f"--executor {config.executor!r}: choose local or ray")
    return LocalExecutor(config.workers, config.device)


def run_sweep(problems: list[Problem] | None, config: SweepConfig, models: ModelOptions, db_url: str | None,
              resume: str | None = None, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    sessions = open_store(db_url)
    if resume:
        run = run_store.get_run(sessions, resume)
        if run is None or run.kind != "sweep":
            raise UsageError(f"no sweep run {resume!r} in this store (see `kernelwright runs list`)")
        config = SweepConfig.model_validate(run.config["sweep"])
        problems = _stored_problems(sessions, run.config["fingerprints"])
        run_store.set_run_status(sessions, resume, "running")
        run_id = resume
    else:
        if not problems:
            raise UsageError("give a problem folder (or --resume RUN_ID)")
        device = resolve_device(config.device)
        notice = device_notice(config.device, device)
        if notice and progress:
            progress(notice)
        optimize = config.optimize.model_copy(update={"device": device}) if config.optimize else None
        config = config.model_copy(update={"device": device, "optimize": optimize,
                                           "problem_keys": [p.key for p in problems]})
        if config.mode == "candidates" and not (config.candidates_dir and Path(config.candidates_dir).is_dir()):
            raise UsageError(f"--candidates {config.candidates_dir}: not a folder")
        with sessions.begin() as session:
            for problem in problems:
                upsert_problem(session, problem)
        run_id = run_store.create_run(sessions, "sweep", models.model if config.mode == "optimize" else None,
                                      {"sweep": config.model_dump(), "fingerprints": [p.fingerprint for p in problems]})
    if progress:
        progress(f"sweep {run_id}: {len(problems)} problems on {config.device} ({config.mode})")
    sweep = Sweep(sessions, run_id, problems, config, progress)
    if config.mode == "optimize":
        coder = build_model(models.model, models)
        judge = build_model(models.judge_model, models) if models.judge_model else coder
        sweep.run_optimize(coder, judge, home())
    else:
        executor = _executor(config)
        try:
            sweep.run_candidates(executor)
        finally:
            executor.shutdown()
    if config.baselines:
        ensure_baselines(sessions, problems, config.device, config.policy, progress)
    run_store.set_run_status(sessions, run_id, "finished")
    return sweep_summary(sessions, run_id)

