"""The parent-child protocol (harness/isolation/protocol.py): every command survives the wire as its own type, the
child has a handler for each, and the parent reads replies no looser than the fields' types."""

from __future__ import annotations

import json

import pytest

from harness.child.main import HANDLERS, Child
from harness.isolation import protocol as P

EXAMPLES = [P.Load(), P.Correctness(), P.Knockout(), P.Knockout(slot=0), P.Census(slot=0), P.Stage([[0, {"a": 1}]]),
            P.Go(), P.Go(P.Audit("knockout", 3)), P.Probe([0, 2], [[1, 5], [3, 4]]), P.Slots([[[0, 64]], [None]]),
            P.Run([0, 1], [[7, 0]], [3]), P.Run([0], audit=P.Audit("share")),
            P.Outputs([1], "timed_0.pt"), P.Finish()]


@pytest.mark.parametrize("command", EXAMPLES, ids=lambda c: repr(c))
def test_every_command_crosses_the_wire_as_itself(command: P.Command) -> None:
    line = json.loads(json.dumps(command.wire()))
    assert P.decode_command(line) == command
    assert P.decode_command(P.as_wire(line)) == command  # the plain dict the senders used before is the same line


def test_the_child_answers_every_command_and_nothing_else() -> None:
    assert set(HANDLERS) == set(P.COMMANDS.values())
    assert all(callable(getattr(Child, name)) for name in HANDLERS.values())
    for wrong in ({"cmd": "exec"}, {"cmd": "go", "extra": 1}, ["go"], {}, {"cmd": ["go"]}):
        with pytest.raises(ValueError):
            P.decode_command(wrong)


def test_a_field_left_unset_is_not_sent() -> None:
    assert P.Knockout().wire() == {"cmd": "knockout"} and P.Knockout(0).wire() == {"cmd": "knockout", "slot": 0}
    assert P.Done(2).wire() == {"done": 2}


def test_replies_are_read_as_strictly_as_their_fields() -> None:
    assert P.Done.read({"done": 2, "kernel_calls": 4, "event_ms": [0.5, 1.0]}) == P.Done(2, [0.5, 1.0], None, 4)
    odd = P.Done.read({"done": 2, "kernel_calls": True, "event_ms": [0.5, 2e6], "outputs": "x"})
    assert odd == P.Done(2)  # out of range, wrong types: read as not sent
    for malformed in ({"done": True}, {"done": "2"}, {"staged": 2}, {"done": 2.0}):
        with pytest.raises(P.MalformedReply):
            P.Done.read(malformed)
    assert P.SlotsMade.read({"slots": [], "owned": [[1, 2], [3], "x", [True, 1], [4, 5, 6]]}).owned == [[1, 2]]
    with pytest.raises(P.MalformedReply):
        P.SlotsMade.read({"slots": {}, "owned": []})
    with pytest.raises(P.MalformedReply):
        P.Staged.read({"failed": "crash", "message": "no"})


def test_a_failure_is_read_whatever_was_asked() -> None:
    assert P.failure({"done": 1}) is None
    assert P.failure({"failed": "runtime_error", "message": "boom"}) == P.Failed("runtime_error", "boom")
    assert P.failure({"failed": 3, "message": ["x"]}) == P.Failed("crash", "")


def test_every_command_declares_the_reply_it_is_read_as() -> None:
    assert all(issubclass(kind.reply, P.Reply) for kind in P.COMMANDS.values())
    assert P.read_reply(P.Load, {"status": "ok", "settings": {"tf32": "off"}}) == P.Status("ok", {"tf32": "off"})
    assert P.read_reply(P.Run([0]), {"done": 1}) == P.Done(1)
    with pytest.raises(P.MalformedReply):
        P.read_reply(P.Stage, {"done": 1})


def test_a_reported_failure_raises_one_typed_failure_whatever_was_asked() -> None:
    trace = "failed while run:\nTraceback (most recent call last):\n  ...\nRuntimeError: shape mismatch\n"
    for command in (P.Load(), P.Run([0]), P.Census(slot=0), P.Finish()):
        with pytest.raises(P.ChildFailed) as raised:
            P.read_reply(command, {"failed": "runtime_error", "message": trace})
        assert raised.value.failed == P.Failed("runtime_error", trace) and raised.value.stage == command.cmd
        assert raised.value.digest == "runtime_error: RuntimeError: shape mismatch"
        assert not raised.value.reference and raised.value.on_side(True).reference
