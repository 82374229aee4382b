"""The optimize loop: a seed round, then rounds of judge -> coder, best-of-N evaluated in parallel, with
contrastive exemplars, budgets, early stopping and exact resume (stored replies and evaluations are replayed,
never paid for or computed twice)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from agent.config import OptimizeConfig
from agent.llm import ChatModel, LLMError, Message
from agent.parse import JudgeAdvice, ParseError, extract_candidate, parse_judge
from agent.prompts import Attempt, Exemplar, coder_messages, judge_messages
from agent.outcomes import Outcome, RunResult
from agent.recorder import RunRecorder
from harness import Evaluation, evaluate
from harness.evaluate import candidate_hash
from kernelbench.problem import Problem
from rewards import select_exemplars

Progress = Callable[[str], None]


class Optimizer:
    def __init__(self, problem: Problem, coder: ChatModel, judge: ChatModel, config: OptimizeConfig,
                 recorder: RunRecorder, progress: Progress | None = None) -> None:
        self.problem, self.coder, self.judge, self.config = problem, coder, judge, config
        self.recorder = recorder
        self.say = progress or (lambda _m: None)
        self.seconds = {"llm_wait": 0.0, "compile": 0.0, "evaluation": 0.0}
        self.started = time.perf_counter()

    def run(self) -> RunResult:
        best: Outcome | None = None
        outcomes: list[Outcome] = []
        focus: Attempt | None = None
        stale, status = 0, "finished"
        for round_ in range(self.config.rounds):
            stop = self._budget_exhausted()
            if stop:
                status = stop
                break
            advice = self._advise(round_, focus) if focus else None
            sources = [self._write(round_, slot, advice, focus) for slot in range(self.config.candidates)]
            round_outcomes = self._evaluate_round(round_, sources)
            outcomes += round_outcomes
            round_best = _fastest(round_outcomes)
            if round_best and (best is None or round_best.attempt.speedup > best.attempt.speedup):
                best, stale = round_best, 0
            else:
                stale += 1
            focus = (round_best or round_outcomes[0]).attempt
            self.say(f"round {round_ + 1}/{self.config.rounds}: best {_describe(best)}, "
                     f"spent ${self.recorder.totals()['cost_usd']:.4f}")
            if best is not None and stale >= self.config.patience:
                status = "converged"
                break
        self.seconds["wall"] = time.perf_counter() - self.started
        return RunResult(status, best, outcomes, dict(self.seconds))

    def _budget_exhausted(self) -> str | None:
        spent = self.recorder.totals()
        if self.config.budget_usd is not None and spent["cost_usd"] >= self.config.budget_usd:
            return "budget_usd"
        if self.config.max_tokens is not None and spent["prompt_tokens"] + spent["completion_tokens"] >= self.config.max_tokens:
            return "max_tokens"
        if self.config.time_limit_s is not None and time.perf_counter() - self.started >= self.config.time_limit_s:
            return "time_limit"
        return None

    def _ask(self, model: ChatModel, round_: int, purpose: str, slot: int, messages: list[Message]) -> str | None:
        stored = self.recorder.finished_call(round_, purpose, slot)
        if stored is not None:  # resumed: replay, do not pay again
            replayed = getattr(model, "replayed", None)
            if replayed:
                replayed(messages, purpose)
            return stored
        started = time.perf_counter()
        try:
            reply = model.complete(messages, purpose=purpose, max_tokens=self.config.reply_tokens)
        except LLMError as exc:
            self.recorder.llm_call(round_, purpose, slot, model.name, messages, None, str(exc))
            self.say(f"{purpose} call failed: {exc}")
            return None
        finally:
            self.seconds["llm_wait"] += time.perf_counter() - started
        self.recorder.llm_call(round_, purpose, slot, model.name, messages, reply, None)
        return reply.content

    def _advise(self, round_: int, focus: Attempt) -> JudgeAdvice | None:
        hardware = self.recorder.hardware_description()
        reply = self._ask(self.judge, round_, "judge", 0, judge_messages(self.problem, self.config.device, focus, hardware))
        if reply is None:
            return None
        try:
            return parse_judge(reply)
        except ParseError:
            return None

    def _write(self, round_: int, slot: int, advice: JudgeAdvice | None, focus: Attempt | None) -> str | Attempt:
        exemplars = [Exemplar(source, speedup) for source, speedup in
                     select_exemplars(self.recorder.accepted_kernels(), self.config.exemplars)]
        messages = coder_messages(self.problem, self.config.device, advice, focus, exemplars)
        reply = self._ask(self.coder, round_, "coder", slot, messages)
        if reply is None:
            return Attempt(source="", verdict="llm_error", reasons=["the coder call failed (see the transcript)"])
        try:
            return extract_candidate(reply)
        except ParseError as exc:
            return Attempt(source=reply[-2000:], verdict="unparseable", reasons=[str(exc)])

    def _evaluate_round(self, round_: int, sources: list[str | Attempt]) -> list[Outcome]:
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=self.config.workers) as pool:
            futures = [pool.submit(self._evaluate_one, round_, slot, source) for slot, source in enumerate(sources)]
            outcomes = [f.result() for f in futures]
        self.seconds["evaluation"] += time.perf_counter() - started
        return outcomes

    def _evaluate_one(self, round_: int, slot: int, source: str | Attempt) -> Outcome:
        if isinstance(source, Attempt):
            return Outcome(round_, slot, source)
        path = self.recorder.save_candidate(round_, slot, source)
        evaluation = self.recorder.known_evaluation(candidate_hash(source))
        if evaluation is None:
            self.say(f"round {round_ + 1}: evaluating candidate {slot + 1}")
            evaluation = evaluate(self.problem, source, self.config.device, self.config.policy)
            self.seconds["compile"] += sum(b.get("seconds", 0.0) for b in evaluation.build.get("builds", [])
                                           if not b.get("cache_hit"))
            self._profile(evaluation, source)
            self.recorder.evaluation(round_, slot, source, evaluation)
        builds = evaluation.build.get("builds", [])
        attempt = Attempt(source, evaluation.verdict.value, evaluation.reasons, evaluation.speedup,
                          evaluation.ref_ms, evaluation.candidate_ms,
                          resources=[k for b in builds for k in b.get("resources", [])],
                          roofline=evaluation.roofline, sass=[b["sass"] for b in builds if b.get("sass")],
                          profile=evaluation.metrics)
        return Outcome(round_, slot, attempt, evaluation, str(path))


    def _profile(self, evaluation: Evaluation, source: str) -> None:
        """Nsight Compute metrics for accepted GPU kernels: the judge reads them next round."""
        if not (self.config.profile and evaluation.accepted and self.config.device == "cuda"):
            return
        from harness.profile import profile_candidate

        names = [k["kernel"] for b in evaluation.build.get("builds", []) for k in b.get("resources", [])]
        evaluation.metrics = profile_candidate(self.problem, source, names, self.config.policy)


def _fastest(outcomes: list[Outcome]) -> Outcome | None:
    accepted = [o for o in outcomes if o.attempt.verdict == "accepted" and o.attempt.speedup is not None]
    return max(accepted, key=lambda o: o.attempt.speedup) if accepted else None


def _describe(best: Outcome | None) -> str:
    return f"{best.attempt.speedup:.2f}x (round {best.round + 1})" if best else "none accepted yet"

