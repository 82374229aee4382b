"""`kernelwright optimize`: build the models, start or resume a run, drive the loop, leave the artifacts."""

from __future__ import annotations

import shlex
import signal
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from agent.config import OptimizeConfig
from agent.llm import ChatModel
from agent.loop import Optimizer
from agent.openai_client import OpenAIChatModel, OpenAIConfig
from agent.pricing import PriceTable
from agent.recorder import RunRecorder
from agent.scripted import ScriptedModel
from harness.device import DeviceError, resolve_device
from harness.paths import home
from kernelbench.bundled import resolve_problem
from kernelwright.eval_service import UsageError
from harness.session import kill_live_processes
from store import open_store
from store import runs as run_store


class RunInterrupted(Exception):
    """Ctrl-C: the run is marked `interrupted` and can be resumed."""

    def __init__(self, run_id: str, resume_command: str) -> None:
        super().__init__(run_id)
        self.run_id = run_id
        self.resume_command = resume_command


@dataclass
class ModelOptions:
    """How to reach the coder (and judge) model."""

    model: str | None = None  # a model name, or scripted:FILE
    judge_model: str | None = None
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float | None = None
    reasoning_effort: str | None = None
    prices: str | None = None


def build_model(name: str | None, options: ModelOptions) -> ChatModel:
    if name and name.startswith("scripted:"):
        try:
            return ScriptedModel(Path(name.removeprefix("scripted:")))
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    try:
        prices = PriceTable(options.prices)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    config = OpenAIConfig(model=name or "gpt-4o", base_url=options.base_url, api_key_env=options.api_key_env,
                          temperature=options.temperature, reasoning_effort=options.reasoning_effort)
    from agent.openai_client import ConfigError

    try:
        return OpenAIChatModel(config, prices)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def run_optimize(problem_spec: str | None, config: OptimizeConfig, models: ModelOptions, db_url: str | None,
                 resume: str | None = None, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    sessions = open_store(db_url)
    runs_root = home()
    if resume:
        recorder = RunRecorder.resume(sessions, resume, runs_root)
        if problem_spec and resolve_problem(problem_spec).fingerprint != recorder.problem.fingerprint:
            raise UsageError(f"run {resume} optimizes {recorder.problem.key}, not {problem_spec}")
        config = recorder.config
    else:
        if not problem_spec:
            raise UsageError("give a PROBLEM (a file or a bundled problem name), or --resume RUN_ID")
        problem = resolve_problem(problem_spec)
        device = resolve_device(config.device)
        if device not in ("cpu", "cuda"):
            raise DeviceError(f"optimize needs a device that runs kernels (cpu or a GPU), not {device}")
        config = config.model_copy(update={"device": device})
        recorder = None
    coder = build_model(models.model, models)
    judge = build_model(models.judge_model, models) if models.judge_model else coder
    if recorder is None:
        recorder = RunRecorder.start(sessions, problem, config, coder.name, runs_root)
    if progress:
        progress(f"run {recorder.run_id}: {recorder.problem.key} on {config.device}, artifacts in {recorder.folder}")
    try:
        with _stop_on_ctrl_c(recorder):
            result = Optimizer(recorder.problem, coder, judge, config, recorder, progress).run()
    except KeyboardInterrupt:
        run_store.set_run_status(sessions, recorder.run_id, "interrupted")
        raise RunInterrupted(recorder.run_id, resume_command(recorder.run_id, models, db_url)) from None
    return recorder.finish(result)


@contextmanager
def _stop_on_ctrl_c(recorder: RunRecorder) -> Iterator[None]:
    """On Ctrl-C, kill the builds and children in flight at once (evaluations running in worker threads would
    otherwise finish first, for up to a minute) and record nothing they report afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        recorder.stopped = True
        kill_live_processes(for_good=True)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def resume_command(run_id: str, models: ModelOptions, db_url: str | None) -> str:
    """The command that continues `run_id` with the same models (the key comes from the environment again)."""
    words = ["kernelwright", "optimize", "--resume", run_id]
    for flag, value in (("--model", models.model), ("--judge-model", models.judge_model),
                        ("--base-url", models.base_url), ("--db", db_url)):
        if value:
            words += [flag, shlex.quote(value)]
    if models.api_key_env != "OPENAI_API_KEY":
        words += ["--api-key-env", models.api_key_env]
    return " ".join(words)
