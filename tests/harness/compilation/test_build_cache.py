"""Builds are keyed by content, never by the name a candidate picks, and a killed build hangs nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.pipeline import evaluate
from harness.policy import EvalPolicy
from harness.records import Verdict
from kernelbench.bundled import find_bundled
from tests.conftest import RELU_CANDIDATE, RELU_FULL_HEADER, compilers_under

pytestmark = pytest.mark.slow
RELU = find_bundled("relu")
FAST = EvalPolicy(timing_budget_s=0.2)


def test_same_source_under_another_name_reuses_the_build() -> None:
    evaluate(RELU, RELU_CANDIDATE.read_text(), "cpu", FAST)  # built (or cached) once
    renamed = RELU_CANDIDATE.read_text().replace('name="relu_cpu"', 'name="totally_different"')
    evaluation = evaluate(RELU, renamed, "cpu", FAST)
    assert evaluation.verdict is Verdict.ACCEPTED
    assert evaluation.build["builds"][0]["cache_hit"] is True


def test_same_name_different_source_never_loads_the_other_kernel() -> None:
    leaky = RELU_CANDIDATE.read_text().replace("src[i] > 0.0f ? src[i] : 0.0f", "src[i] > 0.0f ? src[i] : 0.5f * src[i]")
    assert 'name="relu_cpu"' in leaky
    good = evaluate(RELU, RELU_CANDIDATE.read_text(), "cpu", FAST)
    bad = evaluate(RELU, leaky, "cpu", FAST)
    assert good.verdict is Verdict.ACCEPTED and bad.verdict is Verdict.INCORRECT
    assert good.build["builds"][0]["key"] != bad.build["builds"][0]["key"]


def test_killed_build_leaves_nothing_that_blocks_the_next(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELWRIGHT_BUILD_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("KERNELWRIGHT_PCH", "off")  # two cold builds would start a header in this private cache
    source = RELU_FULL_HEADER.read_text()  # a build slow enough to be killed at 6 s
    killed = evaluate(RELU, source, "cpu", FAST.model_copy(update={"build_timeout_s": 6}))
    assert killed.verdict is Verdict.COMPILE_ERROR and "build timed out" in killed.reasons[0]
    assert compilers_under(tmp_path) == []  # the compilers died with the child
    cold = evaluate(RELU, source, "cpu", FAST)
    warm = evaluate(RELU, source, "cpu", FAST)
    assert cold.verdict is warm.verdict is Verdict.ACCEPTED
    assert cold.build["builds"][0]["cache_hit"] is False and warm.build["builds"][0]["cache_hit"] is True
    assert warm.build["builds"][0]["seconds"] * 10 < cold.build["builds"][0]["seconds"]  # a hash, not a compile
    assert [p.name for p in (tmp_path / "cache").iterdir() if ".tmp-" not in p.name and ".new-" not in p.name and p.name != "pch"] == [
        cold.build["builds"][0]["key"]]
