"""The jail shows only what the candidate needs (issue 31, family 5): the interpreter, the harness's code, the
precompiled headers and its own folder, where its binaries are copied. Before, the project and the whole build
cache were bound read-only and a candidate read other candidates' binaries and build logs, run transcripts and the
store, and carried them out in its own exception text (which reaches the judge model's prompt)."""

from __future__ import annotations

import ast
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from harness.pipeline import evaluate
from harness.policy import EvalPolicy
from harness.records import Check, Verdict
from harness.paths import build_cache_dir, home
from kernelbench.bundled import find_bundled
from tests.conftest import relu_variant

pytestmark = pytest.mark.slow
RELU = find_bundled("relu")
NO_STATIC = EvalPolicy(timing_budget_s=0.2, static_policy="off")


@contextmanager
def _a_run_transcript() -> Iterator[Path]:
    """A run's transcript in the home, as optimize leaves one (never the shared store: other tests use it)."""
    folder = home().resolve() / "20991231-000000-secret"
    folder.mkdir(parents=True, exist_ok=True)
    transcript = folder / "transcript.jsonl"
    transcript.write_text('{"prompt": "secret"}\n')
    try:
        yield transcript
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _what_the_candidate_saw(places: dict[str, str], reader: str) -> dict[str, object]:
    """A candidate that reads `places` at import (with `reader`) and reports what it found in its exception."""
    prelude = (f"import os, pathlib\n_seen = {{}}\nfor _name, _place in {places!r}.items():\n"
               f"    try:\n        _seen[_name] = {reader}\n"
               "    except OSError as _exc:\n        _seen[_name] = type(_exc).__name__\n"
               "raise RuntimeError('SEEN=' + repr(_seen))")
    evaluation = evaluate(RELU, relu_variant("return relu_ext.relu_forward(x)", prelude=prelude), "cpu", NO_STATIC)
    assert evaluation.verdict is Verdict.RUNTIME_ERROR, evaluation.reasons
    text = next(r for r in evaluation.reasons if "SEEN=" in r)
    return ast.literal_eval(text[text.rindex("SEEN=") + 5:].splitlines()[0])


@pytest.mark.proves(Check.JAIL_HOME)
def test_the_build_cache_and_the_home_show_nothing_of_others() -> None:
    evaluate(RELU, relu_variant("return relu_ext.relu_forward(x)"), "cpu", NO_STATIC)  # a build in the cache
    entries = [p.name for p in build_cache_dir().iterdir()]
    assert len(entries) > 1, entries  # the host sees its builds (the headers folder and at least one entry)
    with _a_run_transcript() as _transcript:
        seen = _what_the_candidate_saw({"cache": str(build_cache_dir()), "home": str(home().resolve())},
                                       "sorted(os.listdir(_place))")
    assert set(seen["cache"]) <= {"pch"}, seen
    assert set(seen["home"]) <= {"builds", "scratch"}, seen


@pytest.mark.proves(Check.JAIL_HOME)
def test_another_candidates_build_log_and_the_store_cannot_be_read() -> None:
    """Second form: pathlib reads of known paths (the static policy does not treat pathlib as file I/O)."""
    evaluate(RELU, relu_variant("return relu_ext.relu_forward(x)"), "cpu", NO_STATIC)
    entry = next(p for p in build_cache_dir().iterdir() if p.is_dir() and p.name != "pch")
    log = next(entry.iterdir())
    with _a_run_transcript() as transcript:
        seen = _what_the_candidate_saw({"log": str(log), "transcript": str(transcript)},
                                       "pathlib.Path(_place).read_bytes()[:20]")
    assert seen == {"log": "FileNotFoundError", "transcript": "FileNotFoundError"}, seen
