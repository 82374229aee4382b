"""Advice that says something: the judge's answer is valid JSON, but is its change a change? A small model fills the
schema with its placeholders or with sentences of its own prompt ("change": "Prescribe exactly one change"); such
advice never reaches the coder (the loop asks once more, then runs the round without advice)."""

from __future__ import annotations

import re

from agent.parse import JudgeAdvice, ParseError

_RUN = 4  # words in a row copied from the judge's task sentences: parroting, not a coincidence
_SHINGLE = 5  # words in a row shared with the rules: counted towards how much of the change is copied
_COPIED = 0.6  # the share of a change's words copied from the rules that makes it a copy
_VAGUE = {"a", "an", "the", "to", "of", "it", "its", "this", "that", "and", "or", "for", "in", "on", "by", "with",
          "be", "is", "should", "make", "made", "use", "one", "more", "less", "code", "kernel", "change", "changes",
          "improve", "improves", "improved", "optimize", "optimise", "optimized", "performance", "speed", "speedup",
          "faster", "better", "efficient", "efficiency", "fast", "concrete", "single", "prescribe", "fix", "do",
          "what", "should", "will", "would", "can", "could", "try", "apply", "implementation", "program"}


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9_]+", text.lower())


def _runs(words: list[str], size: int) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + size]) for i in range(len(words) - size + 1)}


def _copied_run(text: str, sources: list[str], size: int = _RUN) -> str | None:
    """The first run of `size` words of `text` that one of `sources` also holds, or None."""
    words = _words(text)
    known = set().union(*(_runs(_words(s), size) for s in sources)) if sources else set()
    for index in range(len(words) - size + 1):
        if tuple(words[index:index + size]) in known:
            return " ".join(words[index:index + size])
    return None


def _copied_share(text: str, rules: str) -> float:
    """How much of `text` (its words) lies inside runs of `_SHINGLE` words that `rules` also holds."""
    words = _words(text)
    known = _runs(_words(rules), _SHINGLE)
    covered = [False] * len(words)
    for index in range(len(words) - _SHINGLE + 1):
        if tuple(words[index:index + _SHINGLE]) in known:
            covered[index:index + _SHINGLE] = [True] * _SHINGLE
    return sum(covered) / len(words) if words else 0.0


def _parroted(text: str, task: list[str], placeholders: list[str], rules: str) -> str | None:
    """Why `text` repeats the judge's prompt instead of saying something, or None."""
    said = " ".join(_words(text))
    for placeholder in placeholders:
        held = " ".join(_words(placeholder))
        if said == held or (len(held.split()) >= 3 and held in said):
            return f"repeats the schema's placeholder ({placeholder!r})"
    run = _copied_run(text, task)
    if run:
        return f"repeats your instructions ({run!r})"
    if _copied_share(text, rules) >= _COPIED:
        return "copies the rules of the prompt"
    return None


def checked_advice(advice: JudgeAdvice, task: list[str], placeholders: list[str], rules: str) -> JudgeAdvice:
    """`advice` whose change names a concrete change in the judge's own words; a diagnosis or expected effect
    that only repeats the prompt is dropped (never passed on). `task`: the prompt's sentences that tell the judge
    what to do; `placeholders`: the schema's values; `rules`: the judging and rules text the prompt carries.
    Raises ParseError (the reason goes back to the judge) when the change is parroted or names nothing."""
    why = _parroted(advice.change, task, placeholders, rules)
    if why:
        raise ParseError(f"the change {why} instead of naming a change to this kernel: name one concrete edit "
                         "(what to change in the code, and where)")
    concrete = [w for w in _words(advice.change) if w not in _VAGUE and not w.isdigit()]
    if not concrete:
        raise ParseError(f"the change {advice.change!r} names no concrete change: say what to change in the code "
                         "(a loop, a memory access, a launch setting, a formula), and where")
    diagnosis = "" if _parroted(advice.diagnosis, task, placeholders, rules) else advice.diagnosis
    effect = "" if _parroted(advice.expected_effect, task, placeholders, rules) else advice.expected_effect
    return advice.model_copy(update={"diagnosis": diagnosis, "expected_effect": effect})
