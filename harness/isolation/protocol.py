"""The parent-child protocol: one small type per command the parent sends and per reply the child sends back.

On the wire every message stays what it was, one JSON object on one line (harness/isolation/channel.py): a
command is `{"cmd": NAME, field: value, ...}` (a field left None is not sent), a reply is its fields as keys. Only
JSON-like data ever crosses the pipe and nothing read from the child builds an object of its choosing: the parent
reads a reply through the type its command declares (`Load.reply` is `Status`; `read_reply(Load, reply)`), which
checks each field's type and raises `MalformedReply` for anything else; a child that reported its own failure
answers `Failed` instead, whatever was asked, and the reading raises `ChildFailed` (the one place a failure is
recognised: no caller looks into a reply for it).

Shared by both sides, so it imports nothing of ours: the child (harness/child/) decodes commands with
`decode_command` and dispatches on their type; the parent (harness/isolation/session.py, harness/measurement/,
harness/gathering/) sends them. The reply types' `wire()` is what the child sends.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar


class MalformedReply(ValueError):
    """A reply that is not the kind asked for, or whose fields have the wrong types: the child's failure."""


R = TypeVar("R", bound="Reply")


# -- replies (child -> parent) ----------------------------------------------------------------------------------

class Reply:
    """One reply. The child builds it and sends `wire()`; the parent reads the dict back with `read`."""

    def wire(self) -> dict[str, Any]:
        return {key: value for key, value in self.__dict__.items() if value is not None}

    @classmethod
    def read(cls: type[R], reply: dict[str, Any]) -> R:
        raise NotImplementedError


def _need(reply: dict[str, Any], key: str, kind: type | tuple[type, ...], what: str) -> Any:
    """reply[key], of exactly `kind` (bool is no int here), or MalformedReply naming the reply."""
    if failure(reply) is not None:
        raise MalformedReply(f"the child failed where {what} was expected")
    if key not in reply:
        raise MalformedReply(f"unexpected reply {str(reply)[:200]}")
    value = reply[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if type(value) not in kinds:
        raise MalformedReply(f"{what}: {key} is a {type(value).__name__}")
    return value


@dataclass
class Failed(Reply):
    """The child's own failure, its kind (a verdict name) and message; it stops answering after it."""

    failed: str
    message: str = ""

    @classmethod
    def read(cls, reply: dict[str, Any]) -> Failed:
        kind, message = reply.get("failed"), reply.get("message", "")
        return cls(kind if isinstance(kind, str) else "crash", message if isinstance(message, str) else "")


def failure(reply: dict[str, Any]) -> Failed | None:
    """The child's failure report, where `reply` is one (the one place that looks)."""
    return Failed.read(reply) if "failed" in reply else None


class ChildFailed(Exception):
    """The child reported its own failure (the candidate's code raised, say) in answer to `stage`: what it said
    (`failed`: its kind and message, the traceback the child kept) and, where a timing side knows, whether it was
    a reference's process (`reference`: the machine's problem, never the candidate's)."""

    def __init__(self, failed: Failed, stage: str, reference: bool = False) -> None:
        super().__init__(failed.message[:200])
        self.failed, self.stage, self.reference = failed, stage, reference

    @property
    def digest(self) -> str:
        """The failure in one line: its kind and the message's last line (the exception, after its traceback)."""
        lines = [line for line in self.failed.message.splitlines() if line.strip()]
        return f"{self.failed.failed}: {lines[-1].strip() if lines else ''}"[:300]

    def on_side(self, reference: bool) -> ChildFailed:
        """The same failure, said of a reference's process or the candidate's."""
        return ChildFailed(self.failed, self.stage, reference)


@dataclass
class Status(Reply):
    """load (ok, or compiled / no_cuda_build), correctness, outputs (ok), finish (finished). `load` also says the
    process's precision settings once loaded (harness/values/precision.py)."""

    status: str = "ok"
    settings: dict[str, str] | None = None

    @classmethod
    def read(cls, reply: dict[str, Any]) -> Status:
        """The status, and the precision settings where they are a dict (read as not sent otherwise)."""
        settings = reply.get("settings")
        return cls(_need(reply, "status", str, "a status"), settings if isinstance(settings, dict) else None)


@dataclass
class KnockedOut(Reply):
    """Whether the knock-out call ran (False: no kernel function to poison)."""

    checked: bool
    status: str = "ok"

    @classmethod
    def read(cls, reply: dict[str, Any]) -> KnockedOut:
        return cls(_need(reply, "checked", bool, "a knock-out"))


@dataclass
class CensusFound(Reply):
    """The compute census (harness/child/census.py) with the kernels' own time: untrusted, validated by its reader."""

    census: dict[str, Any]
    status: str = "ok"

    @classmethod
    def read(cls, reply: dict[str, Any]) -> CensusFound:
        return cls(_need(reply, "census", dict, "a census"))


@dataclass
class Staged(Reply):
    staged: int

    @classmethod
    def read(cls, reply: dict[str, Any]) -> Staged:
        return cls(_need(reply, "staged", int, "a staging"))


@dataclass
class Done(Reply):
    """A batch ran: its calls; on CUDA each call's event time; after `run` where each output lies
    (harness/measurement/frozen_calls.py reads them) and the kernel calls it made; for an audit batch
    (harness/audits/ reads these, untrusted): the nanoseconds spent inside the candidate's kernel functions (the
    share's), whether the knock-out's call ran poisoned (False: the candidate has no kernel function to poison),
    the PyTorch operators the batch ran outside the kernel functions (the census's)."""

    done: int
    event_ms: list[float] | None = None
    outputs: list[Any] | None = None
    kernel_calls: int | None = None
    own_ns: int | None = None
    poisoned: bool | None = None
    census: dict[str, Any] | None = None

    @classmethod
    def read(cls, reply: dict[str, Any]) -> Done:
        """`event_ms` only where every time is a float in (0, 1e6) ms, the other optional fields only where they
        have their types: anything else reads as not sent."""
        done = _need(reply, "done", int, "a batch")
        events, outputs, calls = reply.get("event_ms"), reply.get("outputs"), reply.get("kernel_calls")
        events = events if isinstance(events, list) and all(type(e) is float and 0 < e < 1e6 for e in events) \
            else None
        own, poisoned = reply.get("own_ns"), reply.get("poisoned")
        return cls(done, events, outputs if isinstance(outputs, list) else None,
                   calls if type(calls) is int else None, own if type(own) is int and own >= 0 else None,
                   poisoned if type(poisoned) is bool else None,
                   reply["census"] if isinstance(reply.get("census"), dict) else None)


@dataclass
class Probed(Reply):
    """Per probed call, per output tensor, the values read (or why not): compared, never trusted."""

    values: Any

    @classmethod
    def read(cls, reply: dict[str, Any]) -> Probed:
        if failure(reply) is not None or "values" not in reply:
            raise MalformedReply(f"unexpected reply {str(reply)[:200]}")
        return cls(reply["values"])


@dataclass
class SlotsMade(Reply):
    """Where each input slot lies ([address, bytes] per tensor input, None for the rest) and the storages of the
    model's parameters and buffers ([address, bytes])."""

    slots: list[Any]
    owned: list[Any]

    @classmethod
    def read(cls, reply: dict[str, Any]) -> SlotsMade:
        """`owned` keeps only its [int, int] pairs."""
        slots = _need(reply, "slots", list, "the slots")
        owned = _need(reply, "owned", list, "the slots")
        return cls(slots, [pair for pair in owned if isinstance(pair, list) and len(pair) == 2
                           and type(pair[0]) is int and type(pair[1]) is int])



# -- commands (parent -> child) ---------------------------------------------------------------------------------

KNOCKOUT, SHARE, CENSUS = "knockout", "share", "census"  # the audits among timed calls (harness/audits/)


@dataclass(frozen=True)
class Audit:
    """What an audit batch asks of the candidate's calls (harness/audits/ declares each): `knockout`, call `call`
    with every kernel function poisoned; `share`, the time inside the kernel functions summed; `census`, the batch
    under the compute census. On the wire: `{"kind": ..., "call": ...}`."""

    kind: str
    call: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in (KNOCKOUT, SHARE, CENSUS) or (self.call is not None and type(self.call) is not int):
            raise TypeError(f"no such audit: {str(self.kind)[:40]!r}")

    @property
    def poison(self) -> int | None:
        """The call to make with every kernel function poisoned (the knock-out's)."""
        return self.call if self.kind == KNOCKOUT else None

    @property
    def clock(self) -> bool:
        return self.kind == SHARE

    @property
    def census(self) -> bool:
        return self.kind == CENSUS


def _audit(value: Any) -> Audit | None:
    """The audit a command carries, from its wire form (a dict) or as made."""
    if value is None or isinstance(value, Audit):
        return value
    if not isinstance(value, dict):
        raise TypeError("an audit is an object")
    return Audit(**value)


class Command(Generic[R]):
    """One command. `cmd` is its name on the wire; its dataclass fields are the rest of the message; `reply` the
    type the parent reads its answer as (`read_reply`)."""

    cmd: ClassVar[str]
    reply: ClassVar[type[Reply]]

    def wire(self) -> dict[str, Any]:
        message: dict[str, Any] = {"cmd": self.cmd}
        for key, value in self.__dict__.items():
            if value is not None:
                message[key] = {k: v for k, v in vars(value).items() if v is not None} if isinstance(value, Audit) \
                    else value
        return message


@dataclass
class Load(Command[Status]):
    """Import the candidate and construct ModelNew (the reference's child: construct Model; with `compile`, wrap it
    in torch.compile, the compiled baseline timed like any candidate). -> Status"""

    cmd: ClassVar[str] = "load"
    reply: ClassVar[type[Reply]] = Status
    compile: bool | None = None
    mode: str | None = None  # torch.compile's mode with `compile` (None: its default; "max-autotune")


@dataclass
class Correctness(Command[Status]):
    """The correctness trials run in the child, outputs saved to its scratch folder (CUDA). -> Status"""

    cmd: ClassVar[str] = "correctness"
    reply: ClassVar[type[Reply]] = Status


@dataclass
class Knockout(Command[KnockedOut]):
    """One call with every kernel function poisoned, on input slot `slot` where the parent writes the inputs.
    -> KnockedOut"""

    cmd: ClassVar[str] = "knockout"
    reply: ClassVar[type[Reply]] = KnockedOut
    slot: int | None = None


@dataclass
class Census(Command[CensusFound]):
    """One call under the compute census, on input slot `slot` where the parent writes the inputs. -> CensusFound"""

    cmd: ClassVar[str] = "census"
    reply: ClassVar[type[Reply]] = CensusFound
    slot: int | None = None


@dataclass
class Stage(Command[Staged]):
    """Fresh input sets for the next batch, made in the child from `[trial, recipe]` per call (CUDA). -> Staged"""

    cmd: ClassVar[str] = "stage"
    reply: ClassVar[type[Reply]] = Staged
    calls: list[Any] = field(default_factory=list)


@dataclass
class Go(Command[Done]):
    """The staged calls, back to back, on the parent's clock; with `audit`, an audit batch (at a position only the
    parent chose). -> Done"""

    cmd: ClassVar[str] = "go"
    reply: ClassVar[type[Reply]] = Done
    audit: Audit | None = None

    def __post_init__(self) -> None:
        self.audit = _audit(self.audit)


@dataclass
class Probe(Command[Probed]):
    """Values at `positions` of the last batch's outputs of `calls`. -> Probed"""

    cmd: ClassVar[str] = "probe"
    reply: ClassVar[type[Reply]] = Probed
    calls: list[int] = field(default_factory=list)
    positions: list[list[int]] = field(default_factory=list)


@dataclass
class Slots(Command[SlotsMade]):
    """Map the input slots the parent writes, at the parent's `layout` (harness/isolation/shared_slots.py).
    -> SlotsMade"""

    cmd: ClassVar[str] = "slots"
    reply: ClassVar[type[Reply]] = SlotsMade
    layout: list[Any] = field(default_factory=list)


@dataclass
class Run(Command[Done]):
    """forward() on each of `slots`, on the parent's clock; first `release` held outputs by handle and `hold`
    `[handle, call]` of the last batch; with `audit`, an audit batch (at a position only the parent chose).
    -> Done"""

    cmd: ClassVar[str] = "run"
    reply: ClassVar[type[Reply]] = Done
    slots: list[int] = field(default_factory=list)
    hold: list[list[int]] = field(default_factory=list)
    release: list[int] = field(default_factory=list)
    audit: Audit | None = None

    def __post_init__(self) -> None:
        self.audit = _audit(self.audit)


@dataclass
class Outputs(Command[Status]):
    """Save the last batch's outputs of `calls` to `file` in the scratch folder. -> Status"""

    cmd: ClassVar[str] = "outputs"
    reply: ClassVar[type[Reply]] = Status
    calls: list[int] = field(default_factory=list)
    file: str = ""


@dataclass
class Finish(Command[Status]):
    """Write the result file; the child exits after answering. -> Status ("finished")"""

    cmd: ClassVar[str] = "finish"
    reply: ClassVar[type[Reply]] = Status


COMMANDS: dict[str, type[Command]] = {kind.cmd: kind for kind in (
    Load, Correctness, Knockout, Census, Stage, Go, Probe, Slots, Run, Outputs, Finish)}


def decode_command(message: Any) -> Command:
    """The command a parsed line holds (in the child, from its trusted parent). ValueError when it is none."""
    if not isinstance(message, dict):
        raise ValueError(f"a command must be an object, not {type(message).__name__}")
    name = message.get("cmd")
    kind = COMMANDS.get(name) if isinstance(name, str) else None
    if kind is None:
        raise ValueError(f"unknown command {str(name)[:60]!r}")
    try:
        return kind(**{key: value for key, value in message.items() if key != "cmd"})
    except TypeError as exc:
        raise ValueError(f"malformed {kind.cmd!r} command: {exc}") from None


def as_wire(command: Command | dict[str, Any]) -> dict[str, Any]:
    """What goes on the wire for a typed command or a plain dict of one (the form the senders used before)."""
    return command.wire() if isinstance(command, Command) else command


def read_reply(command: Command[R] | type[Command[R]], reply: dict[str, Any]) -> R:
    """`reply` read as the type `command` declares: ChildFailed where the child reported its own failure instead,
    MalformedReply where it answered anything else."""
    failed = failure(reply)
    if failed is not None:
        raise ChildFailed(failed, command.cmd)
    return command.reply.read(reply)
