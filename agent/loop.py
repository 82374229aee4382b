"""The optimize loop: a seed round, then rounds of judge -> coder, best-of-N written concurrently and evaluated
through the harness's executor (built in parallel, timed one at a time), with contrastive exemplars, budgets,
early stopping and exact resume (stored replies and evaluations are replayed, never paid for or computed twice)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from typing import Callable, TypeVar

from agent.advice import checked_advice
from agent.config import OptimizeConfig
from agent.contract import EXAMPLE_NOTE, direction, example_copy
from agent.llm import ChatModel, EndpointUnreachable, LLMError, LLMReply, Message
from agent.outcomes import Outcome, RunResult
from agent.parse import JudgeAdvice, ParseError, UnusableAdvice, parse_judge
from agent.prompt_size import call_estimate
from agent.prompts import (Attempt, Exemplar, RunContext, coder_messages, judge_messages, judge_own_words,
                           judge_retry_messages, quoted_inline, repair_messages)
from agent.recorder import RunRecorder
from agent.search.population import Archive, Member, signature
from agent.search.population_prompts import slot_messages
from agent.search.stopping import Stopper, floor_line, stopped_by
from agent.search.tune_step import TuneStep
from agent.search.tuning import TuneBudget
from agent.replies import Reading, read_reply, reask_messages, same_file_reask
from agent.wrapper import WrapError, signature as op_signature
from harness.feedback.failure_digest import headline
from harness.pipeline import candidate_hash
from harness.execution.eval_task import EvalTask, Executor, build_seconds
from harness.execution.profile import kernels_of
from harness.records import Evaluation, Unjudged, Verdict
from kernelbench.problem import Problem
from reports.speedups import result_cell, speedup_cell
from rewards import select_exemplars

Progress = Callable[[str], None]
T = TypeVar("T")
_REPAIRABLE = (Verdict.COMPILE_ERROR, Verdict.RUNTIME_ERROR)  # failures a direct fix with the error in hand can address


class _Failing(Exception):
    """The endpoint is gone (or every call keeps failing): the run stops with status `failed`."""


class Optimizer:
    def __init__(self, problem: Problem, coder: ChatModel, judge: ChatModel, config: OptimizeConfig,
                 recorder: RunRecorder, executor: Executor, progress: Progress | None = None) -> None:
        self.problem, self.coder, self.judge, self.config = problem, coder, judge, config
        self.recorder, self.executor = recorder, executor
        self.say = progress or (lambda _m: None)
        self.seconds = {"llm_wait": 0.0, "compile": 0.0, "evaluation": 0.0, "profile": 0.0}
        self.started = time.perf_counter()
        self.failures_in_a_row = 0
        self.fatal: str | None = None
        self.last_error = ""
        self.notes: list[str] = []
        self.others: list[str] = []  # the last round's other attempts, one line each, for the next prompts
        self.history: list[str] = []  # one line per round: the change asked for, what was expected, what came
        self.advice: JudgeAdvice | UnusableAdvice | None = None
        self.lock = threading.Lock()
        self.tuner = TuneStep(problem, config.device, config.policy, executor, recorder,
                              TuneBudget.parse(config.tune_budget), self.say)
        self.tuning_notes: list[str] = []  # the last round's tuning tables, for the judge
        self.archive = Archive() if config.search == "population" else None  # None: the greedy search
        self.stopper = Stopper(config.sol_target, config.min_gain_per_call, config.gain_window)
        self.contract = "kernel" if config.contract == "kernel" else "file"
        self.format_failures = 0  # coder replies in a row that held no file, after their re-ask
        if config.time_limit_s is not None:  # the limit bounds the calls in flight too, not only new rounds
            for model in {id(coder): coder, id(judge): judge}.values():
                bound = getattr(model, "set_deadline", None)
                if bound:
                    bound(time.monotonic() + config.time_limit_s)

    def run(self) -> RunResult:
        best: Outcome | None = None
        outcomes: list[Outcome] = []
        focus: Attempt | None = None
        stale, status, message, why = 0, "finished", None, ""
        self.say(call_estimate(self.problem, self.config, self.coder, self.recorder.hardware_description()))
        for round_ in range(self.config.rounds):
            stop = "interrupted" if self.recorder.stopped else self._budget_exhausted()
            if stop:
                status = stop
                break
            round_started = time.perf_counter()
            try:
                round_outcomes = self._round(round_, focus)
            except _Failing as failing:
                status, message = "failed", str(failing)
                self.say(f"stopping: {message}")
                break
            if self.recorder.stopped:  # Ctrl-C: what this round reported was cut short
                status = "interrupted"
                break
            outcomes += round_outcomes
            round_best = _fastest(round_outcomes)
            if round_best and (best is None or round_best.attempt.speedup > best.attempt.speedup):
                best, stale = round_best, 0
            else:
                stale += 1
            self._archive(round_outcomes)
            focus = _focus(best, round_outcomes) or focus
            self.others, self.tuning_notes = _others(round_outcomes, focus) + self.tuning_notes, []
            self.others += _speed_of_light_note(best, self.config.sol_target)
            self.history.append(_history_line(round_, self.advice, round_outcomes, best))
            if best is not None:
                self._profile(round_, best)
            self._report_round(round_, round_outcomes, best, time.perf_counter() - round_started)
            if best is not None and self.config.stop_at_first_accepted:
                status = "first_accepted"
                break
            if best is not None and stale >= self.config.patience:
                status = "converged"
                break
            rule = self.stopper.after_round(best.attempt.speedup if best else None,
                                            best.attempt.roofline if best else {}, self.recorder.totals()["llm_calls"])
            if rule is not None and round_ < self.config.rounds - 1:
                status, why = rule
                self.say(f"stopping: {why}")
                break
        if status == "finished" and outcomes and all(o.evaluation is None for o in outcomes):
            status, message = "no_kernel", _no_kernel_message(outcomes)
            self.say(f"no kernel: {message}")
        self.seconds["wall"] = time.perf_counter() - self.started
        return RunResult(status, best, outcomes, dict(self.seconds), message, self.notes,
                         why or stopped_by(status, self.config))

    def _round(self, round_: int, focus: Attempt | None) -> list[Outcome]:
        advice = self._advise(round_, focus) if focus else None
        self.advice = advice
        if self.archive is not None and focus is not None and isinstance(advice, JudgeAdvice):
            self.archive.note(candidate_hash(focus.source), advice.diagnosis)
        self._check_endpoint()
        sources = self._write_round(round_, advice, focus)
        self._check_endpoint()
        outcomes = self._evaluate_round(round_, sources)
        for outcome in list(outcomes):
            outcomes += self._repair(round_, outcome)
        return outcomes + self._tune(round_, outcomes)

    def _tune(self, round_: int, outcomes: list[Outcome]) -> list[Outcome]:
        """Each accepted kernel that declares tunables, tuned without an LLM call (agent/search/tune_step.py):
        its winner, evaluated in full, joins the round."""
        tuned_outcomes = []
        for outcome in outcomes:
            if not outcome.attempt.found or self.recorder.stopped:
                continue
            started = time.perf_counter()
            tuned, lines = self.tuner.after(round_, outcome.slot, outcome.attempt.source)
            self.seconds["evaluation"] += time.perf_counter() - started
            self.tuning_notes += lines
            if tuned is not None:
                tuned_outcomes.append(Outcome(round_, outcome.slot, _attempt(tuned.source, tuned.evaluation),
                                              tuned.evaluation, tuned.path, outcome.repair, tuned=tuned.label))
        return tuned_outcomes

    def _archive(self, outcomes: list[Outcome]) -> None:
        """The population search keeps every accepted kernel that is among the best of its approach."""
        if self.archive is None:
            return
        for o in outcomes:
            if o.attempt.found:
                self.archive.add(Member(candidate_hash(o.attempt.source), o.attempt.source, o.attempt.speedup,
                                        signature(o.attempt.source), payload=o.attempt))

    def _repair(self, round_: int, outcome: Outcome) -> list[Outcome]:
        """Direct fixes of a candidate that failed to build or run: the coder gets its kernel and the error back,
        up to `repair_attempts` times, before the judge is asked; every attempt is evaluated and recorded. A
        fix that sends back the file it was to fix is told so once; one that still repeats a kernel already tried,
        or a reply without a file after its re-ask, ends the chain."""
        repairs: list[Outcome] = []
        failed, tried = outcome.attempt, {candidate_hash(outcome.attempt.source)}
        for repair in range(1, self.config.repair_attempts + 1):
            if failed.verdict not in _REPAIRABLE or self.recorder.stopped:
                break
            self._check_endpoint()
            self.say(f"round {round_ + 1}: candidate {outcome.slot + 1} {failed.verdict}; asking for fix {repair}")
            started = time.perf_counter()
            purpose, messages = f"repair{repair}", repair_messages(self.problem, self.config.device, failed,
                                                                   self._context())
            source = self._write(round_, outcome.slot, messages, purpose)
            if not isinstance(source, Attempt) and candidate_hash(source) in tried:  # asked once more, with why
                source = self._same_file(round_, outcome.slot, purpose, messages, source, failed)
            self.seconds["llm_wait"] += time.perf_counter() - started
            if isinstance(source, Attempt):
                repairs.append(Outcome(round_, outcome.slot, source, repair=repair))
                break
            if candidate_hash(source) in tried:
                break
            tried.add(candidate_hash(source))
            fixed = self._evaluate_round(round_, [source], slot=outcome.slot, repair=repair)[0]
            repairs.append(fixed)
            failed = fixed.attempt
        return repairs

    def _report_round(self, round_: int, outcomes: list[Outcome], best: Outcome | None, seconds: float) -> None:
        verdicts = ", ".join(o.attempt.verdict + (f" {_speed(o.attempt)}" if o.attempt.speedup else "")
                             for o in outcomes)
        left = self.config.rounds - round_ - 1
        eta = f", about {seconds * left:.0f} s for the {left} round(s) left" if left else ""
        self.say(f"round {round_ + 1}/{self.config.rounds}: {verdicts}; best {_describe(best)}, "
                 f"spent ${self.recorder.totals()['cost_usd']:.4f}{eta}")

    def _context(self) -> RunContext:
        return RunContext(self.config.policy, self.recorder.hardware_description(), self.others, self.history,
                          self.contract)

    def _budget_exhausted(self) -> str | None:
        spent = self.recorder.totals()
        if self.config.budget_usd is not None and spent["cost_usd"] >= self.config.budget_usd:
            return "budget_usd"
        if self.config.max_tokens is not None and spent["prompt_tokens"] + spent["completion_tokens"] >= self.config.max_tokens:
            return "max_tokens"
        if self.config.time_limit_s is not None and time.perf_counter() - self.started >= self.config.time_limit_s:
            return "time_limit"
        return None

    def _check_endpoint(self) -> None:
        if self.fatal:
            raise _Failing(self.fatal)
        if self.failures_in_a_row >= self.config.max_llm_failures:
            raise _Failing(f"{self.failures_in_a_row} LLM calls in a row failed (the last: {self.last_error}); "
                           "check the endpoint, model name and key, then resume the run")

    def _ask(self, model: ChatModel, round_: int, purpose: str, slot: int, messages: list[Message]) -> str | None:
        reply = self._ask_reply(model, round_, purpose, slot, messages)
        return reply.content if reply is not None else None

    def _ask_reply(self, model: ChatModel, round_: int, purpose: str, slot: int,
                   messages: list[Message]) -> LLMReply | None:
        """One call, or its stored reply when resumed (replayed, not paid again: its finish_reason is unknown)."""
        stored = self.recorder.finished_call(round_, purpose, slot)
        if stored is not None:  # resumed: replay, do not pay again
            replayed = getattr(model, "replayed", None)
            if replayed:
                replayed(messages, purpose)
            return LLMReply(content=stored, model=model.name)
        if self._budget_exhausted() == "time_limit":  # no call starts after the limit (not a failure)
            return None
        try:
            reply = model.complete(messages, purpose=purpose, max_tokens=self.config.reply_tokens)
        except LLMError as exc:
            self.recorder.llm_call(round_, purpose, slot, model.name, messages, None, str(exc))
            self.say(f"{purpose} call failed: {exc}")
            if self._budget_exhausted() == "time_limit":  # cut by the run's limit: the run stops, not fails
                return None
            with self.lock:
                self.failures_in_a_row += 1
                self.last_error = str(exc)
                if isinstance(exc, EndpointUnreachable):
                    self.fatal = str(exc)
            return None
        with self.lock:
            self.failures_in_a_row = 0
        self.recorder.llm_call(round_, purpose, slot, model.name, messages, reply, None)
        return reply

    def _advise(self, round_: int, focus: Attempt) -> JudgeAdvice | UnusableAdvice | None:
        """The judge's advice on `focus`. No judge for a reply that held no kernel: the coder reads why in its
        previous attempt."""
        if focus.verdict is Unjudged.UNPARSEABLE:
            return None
        messages = judge_messages(self.problem, self.config.device, focus, self.recorder.hardware_description(),
                                  self._context())
        started = time.perf_counter()
        try:
            return self._judge(round_, messages)
        finally:
            self.seconds["llm_wait"] += time.perf_counter() - started

    def _judge(self, round_: int, messages: list[Message]) -> JudgeAdvice | UnusableAdvice | None:
        """A reply that is not the JSON asked for, or whose change only repeats the prompt or names nothing, is
        asked again once (slot 1), with the reason; a second one is UnusableAdvice: the round runs without advice,
        noted in the transcript and the report. None when a call failed."""
        reply = self._ask(self.judge, round_, "judge", 0, messages)
        try:
            return self._usable(reply) if reply is not None else None
        except ParseError as first:
            self.say(f"round {round_ + 1}: the judge's advice is not usable ({first}); asking again")
            again = self._ask(self.judge, round_, "judge", 1, judge_retry_messages(messages, reply or "", str(first)))
        try:
            return self._usable(again) if again is not None else None
        except ParseError as second:
            note = (f"round {round_ + 1}: the judge's advice was not usable, twice ({second}); the round ran "
                    "without advice")
            self.notes.append(note)
            self.recorder.note(round_, "judge", note)
            return UnusableAdvice(str(second))

    def _usable(self, reply: str) -> JudgeAdvice:
        return checked_advice(parse_judge(reply), *judge_own_words(self.config.device, self.config.policy))

    def _write_round(self, round_: int, advice: JudgeAdvice | UnusableAdvice | None,
                     focus: Attempt | None) -> list[str | Attempt]:
        """The round's coder calls are independent: they run at the same time (a replaying model, whose replies
        are matched in call order, is asked one call at a time)."""
        kernels = [(source, speedup) for source, speedup in self.recorder.accepted_kernels()
                   if example_copy(source) is None]  # an example copy is never shown as an earlier kernel
        exemplars = [Exemplar(source, speedup) for source, speedup in
                     select_exemplars(kernels, self.config.exemplars)]
        context = self._context()
        diverse = round_ == 0 and self.config.candidates > 1 and self.config.diverse_first_round
        messages = [coder_messages(self.problem, self.config.device, advice, focus, exemplars, context,
                                   direction(self.config.device, slot) if diverse else None)
                    for slot in range(self.config.candidates)]
        if self.archive is not None and round_ > 0 and focus is not None and focus.accepted:
            plans = self.archive.plan(self.config.candidates, round_)
            approaches = [m.approach for m in self.archive.members]
            messages = [slot_messages(plan, self.problem, self.config.device, advice, exemplars, context, approaches)
                        for plan in plans]
        slots = range(self.config.candidates)
        started = time.perf_counter()
        if getattr(self.coder, "sequential", False) or self.config.candidates == 1:
            sources = [self._write(round_, slot, messages[slot]) for slot in slots]
        else:
            sources = _concurrently(lambda slot: self._write(round_, slot, messages[slot]), list(slots))
        self.seconds["llm_wait"] += time.perf_counter() - started
        return sources

    def _write(self, round_: int, slot: int, messages: list[Message], purpose: str = "coder") -> str | Attempt:
        """The file a coder call gave. A reply cut off at the cap, without code, or with a C++ op the harness
        cannot wrap is asked once more (`<purpose>+`), with the reason; a complete lone op is wrapped."""
        reply = self._ask_reply(self.coder, round_, purpose, slot, messages)
        if reply is None:
            return Attempt(source="", verdict=Unjudged.LLM_ERROR, reasons=["the coder call failed (see the transcript)"])
        reading = self._read(round_, purpose, reply, messages)
        resumed_reask = reply.finish_reason is None and \
            self.recorder.finished_call(round_, f"{purpose}+", slot) is not None  # replayed: as the run did then
        if reading.source is not None and not resumed_reask:
            return self._formatted(round_, reading.source)
        self.say(f"round {round_ + 1}: {purpose} {slot + 1}: {reading.reason}; asking again")
        self.recorder.note(round_, purpose, f"{reading.reason}; asked again: {reading.reask}")
        again = self._ask_reply(self.coder, round_, f"{purpose}+", slot,
                                reask_messages(messages, reply.content, reading.reask or ""))
        second = self._read(round_, purpose, again, messages) if again is not None else None
        if second is not None and second.source is not None:
            return self._formatted(round_, second.source)
        fallback = reading.fallback or reading.source
        if fallback is not None:  # the cut-off reply's complete file: better than nothing
            self.recorder.note(round_, purpose, "no file in the second reply: the cut-off reply's last complete "
                                                "file is evaluated")
            return fallback
        why = second.reason if second is not None else "the second call failed"
        if second is not None:
            self._format_failed(round_)
        return Attempt(source=reply.content[-2000:], verdict=Unjudged.UNPARSEABLE,
                       reasons=[f"{reading.reason}; asked again: {why}"])

    def _formatted(self, round_: int, source: str) -> str:
        with self.lock:
            self.format_failures = 0
        return source

    def _format_failed(self, round_: int) -> None:
        """Under `contract` auto, two replies in a row without a file switch the run to the kernel-only contract
        (where the harness can write the file around the op for this problem)."""
        with self.lock:
            self.format_failures += 1
            if self.config.contract != "auto" or self.contract == "kernel" or self.format_failures < 2:
                return
            try:
                op_signature(self.problem)
            except WrapError:
                return
            self.contract = "kernel"
        note = (f"round {round_ + 1}: {self.format_failures} replies in a row held no file: the coder writes only "
                "the C++ op from now on (kernel-only contract), the harness the ModelNew around it")
        self.say(note)
        self.notes.append(note)
        self.recorder.note(round_, "coder", note)

    def _read(self, round_: int, purpose: str, reply: LLMReply, messages: list[Message]) -> Reading:
        tokens = reply.usage.completion_tokens if reply.usage else None
        reading = read_reply(reply.content, reply.finish_reason, tokens, self.problem, self.config.device,
                             messages[-1]["content"], self.contract)
        if reading.note:
            self.recorder.note(round_, purpose, reading.note)
        return reading

    def _same_file(self, round_: int, slot: int, purpose: str, messages: list[Message], source: str,
                   failed: Attempt) -> str | Attempt:
        """A repair that sent back the file it was to fix: told so once, with the error."""
        error = headline(failed.reasons[0], failed.source, 300) if failed.reasons else str(failed.verdict)
        self.say(f"round {round_ + 1}: {purpose} sent the same file back; asking again")
        self.recorder.note(round_, purpose, "the repair was the same file; asked again")
        again = self._ask_reply(self.coder, round_, f"{purpose}+same", slot,
                                reask_messages(messages, f"```python\n{source}```", same_file_reask(error)))
        if again is None:
            return source
        reading = self._read(round_, purpose, again, messages)
        return reading.source if reading.source is not None else source

    def _evaluate_round(self, round_: int, sources: list[str | Attempt], slot: int = 0,
                        repair: int = 0) -> list[Outcome]:
        """Every new kernel of the round goes to the executor at once; identical kernels are evaluated once.
        `slot`: the first source's slot (a repair evaluates one source of a given slot)."""
        first_slot = slot
        started = time.perf_counter()
        known: dict[str, Evaluation] = {}
        pending: dict[str, Future[Evaluation]] = {}
        for slot, source in enumerate(sources, first_slot):
            if isinstance(source, Attempt):
                continue
            digest = candidate_hash(source)
            if digest in known or digest in pending:
                continue
            stored = self.recorder.known_evaluation(digest)
            if stored is not None:
                known[digest] = stored
            else:
                self.say(f"round {round_ + 1}: evaluating candidate {slot + 1}" + (f", fix {repair}" if repair else ""))
                pending[digest] = self.executor.submit(EvalTask(self.problem.key, self.problem, source,
                                                                self.config.device, self.config.policy))
        outcomes, recorded = [], set(known)
        for slot, source in enumerate(sources, first_slot):
            if isinstance(source, Attempt):
                outcomes.append(Outcome(round_, slot, source, repair=repair))
                continue
            path = self.recorder.save_candidate(round_, slot, source, repair)
            digest = candidate_hash(source)
            if digest not in known:
                known[digest] = pending[digest].result()
            evaluation = known[digest]
            if digest not in recorded:  # the caller is the store's only writer
                recorded.add(digest)
                _name_example(source, evaluation)
                self.seconds["compile"] += build_seconds(evaluation)  # with 2+ workers, the prebuild's
                self.recorder.evaluation(round_, slot, source, evaluation, repair)
            outcomes.append(Outcome(round_, slot, _attempt(source, evaluation), evaluation, str(path), repair))
        self.seconds["evaluation"] += time.perf_counter() - started
        return outcomes

    def _profile(self, round_: int, judged: Outcome) -> None:
        """Nsight Compute metrics of the one kernel the judge reads next round (GPU only)."""
        evaluation = judged.evaluation
        if not (self.config.profile and self.config.device == "cuda" and evaluation is not None):
            return
        if judged.attempt.profile:  # the best of an earlier round, profiled then
            return
        if evaluation.metrics:  # resumed: profiled before
            judged.attempt.profile = evaluation.metrics
            return
        names = kernels_of(evaluation)
        started = time.perf_counter()
        self.say(f"round {round_ + 1}: profiling the best kernel with Nsight Compute")
        task = EvalTask(self.problem.key, self.problem, judged.attempt.source, self.config.device, self.config.policy)
        metrics = self.executor.profile(task, names).result()
        self.seconds["profile"] += time.perf_counter() - started
        judged.attempt.profile = metrics
        self.recorder.profile(judged.attempt.source, metrics)


def _concurrently(call: Callable[[int], T], items: list[int]) -> list[T]:
    """`call` on every item at once, in daemon threads: on Ctrl-C the run stops without waiting for HTTP
    replies that nobody will record."""
    results: list[Future[T]] = [Future() for _ in items]

    def work(index: int) -> None:
        try:
            results[index].set_result(call(items[index]))
        except BaseException as exc:  # handed to the caller, which re-raises it
            results[index].set_exception(exc)

    for index in range(len(items)):
        threading.Thread(target=work, args=(index,), daemon=True, name="kernelwright-coder").start()
    return [result.result() for result in results]


def _attempt(source: str, evaluation: Evaluation) -> Attempt:
    builds = evaluation.build.get("builds", [])
    copied = example_copy(source) if evaluation.verdict is Verdict.ACCEPTED else None
    return Attempt(source, evaluation.verdict, evaluation.reasons, evaluation.speedup, evaluation.ref_ms,
                   evaluation.candidate_ms, resources=[k for b in builds for k in b.get("resources", [])],
                   roofline=evaluation.roofline, sass=[b["sass"] for b in builds if b.get("sass")],
                   profile=evaluation.metrics,
                   speedup_ci=tuple(evaluation.speedup_ci) if evaluation.speedup_ci else None,  # type: ignore[arg-type]
                   speedup_significant=evaluation.speedup_significant, example=copied)


def _focus(best: Outcome | None, outcomes: list[Outcome]) -> Attempt | None:
    """What the judge and the coder start from next: the run's best kernel (after a slower or failed round the
    search returns to it; the round's attempts reach the prompts as one line each), else the first slot's last
    failure that has code to look at (after its repairs, the latest kernel and error)."""
    if best is not None:
        return best.attempt
    failures = [o for o in outcomes if o.attempt.verdict is not Unjudged.LLM_ERROR and o.attempt.source]
    return min(failures, key=lambda o: (o.slot, -o.repair)).attempt if failures else None


def _others(outcomes: list[Outcome], focus: Attempt | None, limit: int = 6) -> list[str]:
    """The round's attempts other than the one the prompts show in full: what each got, in one line (a failure's
    first compiler error or exception), so the next prompt does not bring back an approach that failed."""
    lines = []
    for outcome in outcomes:
        attempt = outcome.attempt
        if attempt is focus or attempt.verdict is Unjudged.LLM_ERROR:
            continue
        name = f"candidate {outcome.slot + 1}" + (f", fix {outcome.repair}" if outcome.repair else "")
        result = f"accepted, {attempt.speedup:.2f}x" if attempt.speedup is not None else attempt.verdict
        why = f": {quoted_inline(headline(attempt.reasons[0], attempt.source, 200))}" if attempt.reasons and \
            not attempt.accepted else ""
        lines.append(f"{name}: {result}{why}")
    return lines[:limit]


def _history_line(round_: int, advice: JudgeAdvice | UnusableAdvice | None, outcomes: list[Outcome],
                  best: Outcome | None) -> str:
    """What one round tried and what it gave: the judge's change and expected effect, then the round's best
    result (or its first failure), against the best so far."""
    asked = ""
    if isinstance(advice, JudgeAdvice):
        expected = f" (expected: {_clip(advice.expected_effect, 120)})" if advice.expected_effect else ""
        asked = f"asked to {_clip(advice.change, 200)}{expected}; "
    elif isinstance(advice, UnusableAdvice):
        asked = "no usable advice; "
    accepted = _fastest(outcomes)
    if accepted is not None:
        got = f"got {accepted.attempt.speedup:.2f}x"
        got += " (the best so far)" if accepted is best else f" (best so far {best.attempt.speedup:.2f}x)" if best \
            else ""
    else:
        failed = next((o for o in outcomes if o.attempt.verdict is not Unjudged.LLM_ERROR), None)
        got = "got no kernel (the coder calls failed)" if failed is None else \
            f"got {failed.attempt.verdict}" + (
                f": {quoted_inline(headline(failed.attempt.reasons[0], failed.attempt.source, 160))}"
                if failed.attempt.reasons else "")
    return f"round {round_ + 1}: {asked}{got}"


def _speed_of_light_note(best: Outcome | None, target: float | None) -> list[str]:
    """How far the best kernel is from the device's floor, and where the run stops: for the judge and coder."""
    where = floor_line(best.attempt.roofline) if best is not None else ""
    if not where:
        return []
    stop = f"; the run stops at {target:.0%}" if target else ""
    return [f"speed of light: the best kernel so far runs at {where}{stop}"]


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 4].rsplit(" ", 1)[0] + " ..."


def _no_kernel_message(outcomes: list[Outcome]) -> str:
    """Why a run that never evaluated anything has no kernel: how many replies held no file, how many calls
    failed."""
    unparseable = sum(o.attempt.verdict is Unjudged.UNPARSEABLE for o in outcomes)
    failed = sum(o.attempt.verdict is Unjudged.LLM_ERROR for o in outcomes)
    return (f"the model produced no kernel to evaluate: {unparseable} of {len(outcomes)} replies had no complete "
            f"```python block defining ModelNew (a refusal or a cut-off reply), {failed} call(s) failed; see the "
            "transcript")


def _name_example(source: str, evaluation: Evaluation) -> None:
    """A candidate that is the contract's worked example with trivial edits says so in its verdict's notes (it
    measures the example, not a kernel the run found)."""
    copied = example_copy(source)
    note = f"{EXAMPLE_NOTE} ({copied}) with trivial edits: it is not reported as a kernel this run found"
    if copied and not any(r.startswith(EXAMPLE_NOTE) for r in evaluation.reasons):
        evaluation.reasons.append(note)


def _fastest(outcomes: list[Outcome]) -> Outcome | None:
    accepted = [o for o in outcomes if o.attempt.found]
    return max(accepted, key=lambda o: o.attempt.speedup) if accepted else None


def _speed(attempt: Attempt) -> str:
    return speedup_cell(attempt.speedup, attempt.speedup_ci, attempt.speedup_significant)


def _describe(best: Outcome | None) -> str:
    """The best kernel so far as a result: `no speedup found (...)` until one is significantly faster."""
    if best is None:
        return "none accepted yet"
    attempt = best.attempt
    return f"{result_cell(attempt.speedup, attempt.speedup_ci, attempt.speedup_significant)} (round {best.round + 1})"
