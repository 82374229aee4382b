"""The registry (harness/checks.py) is the one declaration of every check: the gates' order, the switches, what a
finding decides under each level and the docs' tables all come from it."""

from __future__ import annotations

import pytest

from harness.checks import ROWS, TAGGED, gate_order, switches, verdict_under
from harness.decision import gates
from harness.defences import KNOWN
from harness.records import Check, Finding, Verdict
from tests.harness import proofs


def test_every_tag_has_exactly_one_row() -> None:
    tagged = [row.tag for row in ROWS if row.tag is not Check.NONE]
    assert len(tagged) == len(set(tagged))
    assert set(tagged) == set(Check) - {Check.NONE}


def test_the_gates_run_in_the_order_the_rows_stand() -> None:
    assert [g.__name__ for g in gates.GATES] == list(gate_order()) == [
        "static_policy", "limits", "child_ended", "kernel_built", "built_sources", "compile_only", "tampering",
        "outputs_readable", "call_protocol", "trial_count", "correctness", "numerical_contract", "determinism",
        "timing_protocol", "ghost_kernel", "runtime_compute", "degenerate_problem", "cached_answers",
        "timing_samples", "timing_notes", "protocol_statement"]


def test_the_switches_are_the_rows_and_each_has_attack_tests() -> None:
    assert KNOWN == switches()
    proved = proofs.proofs()
    assert [row.switch for row in ROWS if row.switch and not proved.get(row.tag)] == []


def test_every_mark_names_a_check_of_the_registry() -> None:
    assert set(proofs.proofs()) <= set(TAGGED)


@pytest.mark.parametrize("tag", [Check.RUNTIME_COMPUTE, Check.CACHE, Check.PROTOCOL, Check.PRECISION])
def test_strict_refuses_what_default_only_says(tag: Check) -> None:
    assert [verdict_under(tag, level) for level in ("strict", "default", "off")] == [Verdict.REJECTED, None, None]


def test_a_tag_is_the_enum_and_prints_as_before() -> None:
    found = Finding("ghost-kernel", "x")
    assert found.check is Check.GHOST_KERNEL and found.render() == "[ghost-kernel] x"
    assert Finding(Check.NONE, "crashed").render() == "crashed"
    with pytest.raises(ValueError):
        Finding("no-such-check", "x")


@pytest.mark.parametrize("name", sorted(proofs.DOCS))
def test_the_committed_docs_match_the_registry(name: str) -> None:
    assert proofs.rendered(name) == proofs.DOCS[name].read_text(), "run: python -m tests.harness.proofs --write"
