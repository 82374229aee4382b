"""The audits among timed calls (harness/audits/), each read on hand-made replies without a child process: what it
asks of the candidate's batch, how the reply is read, the facts it yields and the registry row it gathers for."""

from __future__ import annotations

import pytest

from harness.audits.among_timed import AUDITS, audits_for
from harness.audits.audit import Audited, added
from harness.audits.census import Census, among_timed, of_its_own
from harness.audits.knockout import Knockout
from harness.audits.share import Share
from harness.checks import ROWS
from harness.isolation import protocol as P
from harness.policy import EvalPolicy
from harness.records import Check


def test_each_audit_gathers_for_a_row_of_the_registry() -> None:
    assert [audit.kind for audit in AUDITS] == [P.KNOCKOUT, P.SHARE, P.CENSUS]  # the order positions are drawn in
    assert all(audit.row in ROWS for audit in AUDITS)
    assert Knockout.row.tag is Check.GHOST_KERNEL and Knockout.row.switch == "knockout"
    assert Share.row.tag is Census.row.tag is Check.RUNTIME_COMPUTE


def test_which_audits_a_timed_run_makes() -> None:
    assert [a.kind for a in audits_for(EvalPolicy(), "cpu")] == ["knockout", "share", "census"]
    assert [a.kind for a in audits_for(EvalPolicy(), "cuda")] == ["knockout", "census"]  # no share off the CPU
    assert [a.kind for a in audits_for(EvalPolicy(knockout=False), "cpu")] == ["share", "census"]
    assert audits_for(EvalPolicy(hardening=False), "cpu") == []


def test_the_command_carries_one_audit_field() -> None:
    asked = Knockout().ask(lambda n: n - 1, 8)
    assert asked == P.Audit("knockout", 7) and asked.poison == 7 and not asked.clock and not asked.census
    assert Share().ask(lambda n: 0, 8) == P.Audit("share") and P.Audit("share").clock
    assert P.Run([0, 1], audit=asked).wire() == {"cmd": "run", "slots": [0, 1], "hold": [], "release": [],
                                                 "audit": {"kind": "knockout", "call": 7}}
    assert P.decode_command({"cmd": "go", "audit": {"kind": "census"}}) == P.Go(P.Audit("census"))
    for wrong in ({"kind": "exec"}, {"kind": "knockout", "call": "1"}, ["census"], {"kind": "share", "x": 1}):
        with pytest.raises(ValueError):
            P.decode_command({"cmd": "go", "audit": wrong})


def test_the_share_reads_the_kernels_time_against_the_parents_clock() -> None:
    found = Share().read(Audited(), P.Done(4, own_ns=300), batch_ns=1_000, calls=4)
    assert (found.own_ns, found.clocked_ns, found.own_share) == (300, 1_000, 0.3)
    assert Share().read(found, P.Done(4), batch_ns=1_000, calls=4) == found  # nothing clocked: nothing added


def test_the_census_reads_what_the_child_counted_and_validates_it() -> None:
    counted = {"ops": {"aten.mm": 2, "aten.add": "x", "aten.neg": -1}, "library_flops": 64.0}
    found = Census().read(Audited(), P.Done(4, census=counted), batch_ns=1, calls=4)
    found = Census().read(found, P.Done(4, census={"ops": {"aten.mm": 1}}), batch_ns=1, calls=4)
    assert (found.census_ops, found.census_calls, found.census_flops) == ({"aten.mm": 3}, 8, 64.0)
    assert among_timed(found) == {"ops": {"aten.mm": 3}, "share": None, "calls": 8, "flops": 64.0}
    assert among_timed(Audited()) is None
    assert of_its_own({"ops": {"aten.mm": 1}, "library_s": 0.75, "own_s": 0.25})["share"] == 0.25
    assert of_its_own({"ops": "all of them"}) is None


def test_the_knockout_judges_only_a_call_that_ran_poisoned() -> None:
    asked = P.Audit("knockout", 2)
    judged: list[int] = []

    def right(call: int) -> bool:
        judged.append(call)
        return True

    assert Knockout().judged(Audited(), P.Done(4, poisoned=False), asked, right) == Audited()  # nothing to poison
    found = Knockout().judged(Audited(), P.Done(4, poisoned=True), asked, right)
    assert judged == [2] and (found.knockouts, found.knocked_out_right) == (1, True)


def test_several_process_sets_audits_add_up() -> None:
    one = Audited(knockouts=1, knocked_out_right=False, own_ns=1, clocked_ns=4, census_ops={"aten.mm": 1})
    two = Audited(knockouts=1, knocked_out_right=True, own_ns=1, clocked_ns=4, census_calls=2)
    both = added([one, two])
    assert (both.knockouts, both.knocked_out_right, both.own_share, both.census_ops) == (2, True, 0.25, {"aten.mm": 1})
    assert added([Audited(), Audited()]).knocked_out_right is None and added([Audited()]).census_ops is None
