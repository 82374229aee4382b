"""Everything a run leaves behind, written as it happens: the store (run, LLM calls, candidates, evaluations)
and `<home>/<run-id>/` (harness.paths.home: candidate sources, transcript.jsonl, best.py, report.md)."""

from __future__ import annotations

import json
import os
import platform
import threading
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from agent.llm import LLMReply, Message
from agent.run_spec import ProblemRef, RunSpec, code_version
from harness.pipeline import candidate_hash
from harness.records import Evaluation
from kernelbench.problem import Problem
from reports.optimize_report import optimize_markdown
from store import record_evaluation
from store import runs as run_store
from store.results import add_problem, problem_by_fingerprint
from agent.outcomes import RunResult


class ResumeError(ValueError):
    """The run cannot be resumed as asked; the message says why."""


class RunRecorder:
    def __init__(self, sessions: sessionmaker[Session], run_id: str, problem: Problem, folder: Path,
                 spec: RunSpec) -> None:
        self.sessions, self.run_id, self.problem, self.folder = sessions, run_id, problem, folder
        self.spec, self.config = spec, spec.optimize
        self.stopped = False  # set on Ctrl-C: evaluations cut short are not recorded
        self.transcript_lock = threading.Lock()  # a round's coder calls finish in parallel
        (folder / "candidates").mkdir(parents=True, exist_ok=True)

    @classmethod
    def start(cls, sessions: sessionmaker[Session], problem: Problem, spec: RunSpec, runs_root: Path) -> "RunRecorder":
        """A new run, its spec stored whole: problem, models, endpoint, sampling, budgets, policy, code version."""
        add_problem(sessions, problem)
        version, commit = code_version()
        spec = spec.model_copy(update={
            "problem": ProblemRef(key=problem.key, fingerprint=problem.fingerprint, path=problem.path),
            "models": spec.models.frozen(), "kernelwright_version": version, "kernelwright_commit": commit})
        run_id = run_store.create_run(sessions, "optimize", spec.models.coder, spec.model_dump(mode="json"))
        return cls(sessions, run_id, problem, runs_root / run_id, spec)

    @classmethod
    def resume(cls, sessions: sessionmaker[Session], run_id: str, runs_root: Path) -> "RunRecorder":
        spec = stored_spec(sessions, run_id)
        run_store.set_run_status(sessions, run_id, "running")
        return cls(sessions, run_id, stored_problem(sessions, spec, run_id), runs_root / run_id, spec)

    def finished_call(self, round_: int, purpose: str, slot: int) -> str | None:
        row = run_store.finished_llm_call(self.sessions, self.run_id, self.problem, round_, purpose, slot)
        return row.reply if row is not None else None

    def llm_call(self, round_: int, purpose: str, slot: int, model: str, messages: list[Message],
                 reply: LLMReply | None, error: str | None) -> None:
        if self.stopped:  # a reply that arrived after Ctrl-C: the resumed run asks again
            return
        run_store.record_llm_call(self.sessions, self.run_id, self.problem, round_, purpose, slot, model, messages,
                                  reply, error)
        # counted from 1 in the transcript, as in every report and file name (the store keeps its own 0-based keys)
        entry = {"round": round_ + 1, "purpose": purpose, "slot": slot + 1, "model": model, "messages": messages,
                 "reply": reply.content if reply else None, "error": error,
                 "usage": reply.usage.model_dump() if reply else None, "cost_usd": reply.cost_usd if reply else 0.0,
                 "finish_reason": reply.finish_reason if reply else None,
                 "truncated": bool(reply and reply.finish_reason == "length"),  # cut off at the reply-token cap
                 "latency_s": round(reply.latency_s, 3) if reply else None}
        with self.transcript_lock, open(self.folder / "transcript.jsonl", "a") as transcript:
            transcript.write(json.dumps(entry) + "\n")

    def note(self, round_: int, purpose: str, text: str) -> None:
        """A line in the transcript that is no LLM call: what the loop made of one (a judge reply it could not
        parse, say)."""
        if self.stopped:
            return
        with self.transcript_lock, open(self.folder / "transcript.jsonl", "a") as transcript:
            transcript.write(json.dumps({"round": round_ + 1, "purpose": purpose, "note": text}) + "\n")

    def save_candidate(self, round_: int, slot: int, source: str, repair: int = 0) -> Path:
        fix = f"_repair{repair}" if repair else ""
        path = self.folder / "candidates" / f"round{round_ + 1}_candidate{slot + 1}{fix}.py"
        path.write_text(source)
        return path

    def known_evaluation(self, source_hash: str) -> Evaluation | None:
        return run_store.run_evaluation(self.sessions, self.run_id, self.problem, source_hash)

    def evaluation(self, round_: int, slot: int, source: str, evaluation: Evaluation, repair: int = 0) -> None:
        """`repair`: the n-th direct fix of the slot's kernel (its origin `llm:repairN`, written from the
        `repairN` call), 0 for the kernel the round's coder call wrote."""
        if self.stopped:  # interrupted: its processes were killed under it, so this is no verdict on the kernel
            return
        origin = f"llm:repair{repair}" if repair else "llm"
        record_evaluation(self.sessions, self.problem, source, evaluation, run_id=self.run_id, origin=origin,
                          round=round_, slot=slot)

    def profile(self, source: str, metrics: dict[str, Any]) -> None:
        """The judged kernel's profiler records, stored with its evaluation (the verdict is the harness's)."""
        if not self.stopped:
            run_store.set_run_profile(self.sessions, self.run_id, self.problem, candidate_hash(source), metrics)

    def accepted_kernels(self) -> list[tuple[str, float]]:
        return run_store.accepted_in_problem(self.sessions, self.problem)

    def totals(self) -> dict[str, Any]:
        return run_store.totals(self.sessions, self.run_id)

    def hardware_description(self) -> str:
        """The spec sheet the judge reads: peak rates, SMs, shared memory, L2 (GPU) or measured peaks (CPU)."""
        from harness.feedback.device_specs import cpu_spec, gpu_spec

        if self.config.device == "cuda":
            import torch

            if not torch.cuda.is_available():  # the candidates run elsewhere (a Ray cluster, a GPU pool)
                return "an NVIDIA GPU (its model is not visible from the process that writes the prompts)"
            name = torch.cuda.get_device_name(0)
            spec = gpu_spec(name)
            return spec.sheet() if spec else name
        threads = self.config.policy.cpu_threads
        return (f"{cpu_spec().sheet()}; {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
                f"timed with {threads} thread(s)")

    def finish(self, result: RunResult) -> dict[str, Any]:
        best_path = None
        if result.best is not None:
            best_path = self.folder / "best.py"
            best_path.write_text(result.best.attempt.source)
        unpriced = (run_store.get_run(self.sessions, self.run_id).config or {}).get("unpriced_models")
        totals = {**self.totals(), "unpriced_models": unpriced}  # a model without a price never reads as $0
        (self.folder / "report.md").write_text(optimize_markdown(self.run_id, self.problem.key, self.config.device,
                                                                   totals, result))
        run_store.set_run_status(self.sessions, self.run_id, result.status)
        totals = self.totals()
        best = None if result.best is None else {"verdict": result.best.attempt.verdict,
                                                 "speedup": result.best.attempt.speedup, "path": str(best_path),
                                                 "speedup_ci": result.best.attempt.speedup_ci,
                                                 "speedup_significant": result.best.attempt.speedup_significant,
                                                 "round": result.best.round + 1}
        return {"run_id": self.run_id, "status": result.status, "message": result.message,
                "problem": self.problem.key, "best": best,
                **totals, "folder": str(self.folder), "seconds": _split(result.seconds)}


def stored_spec(sessions: sessionmaker[Session], run_id: str) -> RunSpec:
    run = run_store.get_run(sessions, run_id)
    if run is None or run.kind != "optimize":
        raise ResumeError(f"no optimize run {run_id!r} in this store (see `kernelwright runs list`)")
    return RunSpec.from_stored(run.config)


def stored_problem(sessions: sessionmaker[Session], spec: RunSpec, run_id: str) -> Problem:
    problem = problem_by_fingerprint(sessions, spec.problem.fingerprint)
    if problem is None:
        raise ResumeError(f"run {run_id}: its problem is missing from the store")
    return problem


def _split(seconds: dict[str, float]) -> dict[str, float]:
    wall = seconds.get("wall", 0.0)
    evaluation = seconds.get("evaluation", 0.0)
    compile_s = min(seconds.get("compile", 0.0), evaluation)
    llm = seconds.get("llm_wait", 0.0)
    profile = seconds.get("profile", 0.0)
    return {"wall": round(wall, 3), "llm_wait": round(llm, 3), "compile": round(compile_s, 3),
            "evaluation_excluding_compile": round(evaluation - compile_s, 3), "profile": round(profile, 3),
            "agent_overhead": round(max(0.0, wall - llm - evaluation - profile), 3)}
