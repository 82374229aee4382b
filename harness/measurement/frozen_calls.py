"""One side of a CPU timing driven through its memory: the parent writes each call's inputs into the child and
reads its outputs back itself, while the child's whole process tree is frozen (runs in the parent).

A batch goes: (frozen) the parent writes the batch's input sets into slots the child allocated once, starts its
clock, thaws the child and sends `run` with slot numbers; the child calls forward on each and answers `done`
with where the outputs lie; the parent stops its clock and freezes the child again. Then, with both sides frozen,
it reads what it wants: 16 values at secret positions of every call's outputs on both sides, whole outputs of
a random few and of any that differ, and those calls' input slots (mutation). The candidate's process never sees
a call's inputs outside the timed interval, never runs harness code the parent trusts (a lie about where an
output lies is read as a wrong output), never learns which calls are checked (every `run` is alike, and the
parent chooses after the call), and cannot run while the reference is timed.
"""

from __future__ import annotations

from typing import Any

from harness.defences import is_off
from harness.isolation import protocol as P
from harness.isolation import remote_memory
from harness.isolation.session import ChildSession
from harness.isolation.shared_slots import SharedSlots
from harness.records import Check, Finding
from harness.values.integrity import overlaps
from harness.values.tensors import NOT_PLAIN, UNSUPPORTED, nbytes

_SLOT_BYTES = 256 << 20  # most input memory the slots of one child may take


class SideFailure(Exception):
    """The child broke the protocol (a wrong reply, memory that cannot be read where it said). A child that
    reported its own failure raises `ChildFailed` (harness/isolation/protocol.py) instead."""


def slot_count(inputs: list[Any], most: int = 64) -> int:
    """How many input sets one child's slots hold (at most 256 MB of them)."""
    return max(1, min(most, _SLOT_BYTES // max(nbytes(inputs), 1)))


def output_bound(reference_output: Any) -> int:
    """The most bytes one call's output may span in the child: far more than the reference's, never unbounded."""
    from harness.values.integrity import flatten

    return 8 * max(nbytes(flatten(reference_output)), 1) + 4096


def parent_driven(device: str) -> bool:
    """Whether timing on `device` can run this way here: the CPU, children that can be frozen, a sealable shared
    file and the parent allowed to read its children's memory. Elsewhere the children stage their inputs."""
    from harness.isolation.cgroups import builds_freezable
    from harness.isolation.shared_slots import supported

    if is_off("parent_slots"):
        return False
    return device == "cpu" and builds_freezable() and supported() and remote_memory.available()


def _dtype(name: Any) -> Any:
    import torch

    value = getattr(torch, name, None) if isinstance(name, str) else None
    return value if isinstance(value, torch.dtype) else None


class TensorAt:
    """A validated description of one output tensor in the child's memory (untrusted numbers, checked shapes)."""

    def __init__(self, described: Any, max_bytes: int) -> None:
        import torch

        if isinstance(described, str):  # the child's word for what it returned instead
            raise ValueError(described[:120])
        if not isinstance(described, list) or len(described) != 7:
            raise ValueError(f"not a tensor ({str(described)[:60]})")
        address, dtype, shape, stride, _storage, _storage_bytes, plain = described
        self.dtype = _dtype(dtype)
        if self.dtype is None or type(address) is not int or not plain:
            raise ValueError(NOT_PLAIN)
        if not _ints(shape) or not _ints(stride) or len(shape) != len(stride):
            raise ValueError("a malformed shape or stride")
        self.address, self.shape, self.stride = address, shape, stride
        self.itemsize = torch.empty((), dtype=self.dtype).element_size()
        self.numel = 1
        for size in shape:
            self.numel *= size
        extent = 1 + sum((size - 1) * step for size, step in zip(shape, stride)) if self.numel else 0
        self.nbytes = extent * self.itemsize
        if self.nbytes > max_bytes:
            raise ValueError(f"{self.nbytes} bytes, far more than the reference's output")

    @property
    def span(self) -> tuple[int, int]:
        return self.address, self.address + self.nbytes

    def offsets(self, positions: list[int]) -> list[int]:
        """Element offsets of flat positions (modulo numel) through the strides."""
        found = []
        for position in positions:
            rest, offset = position % self.numel, 0
            for size, step in zip(reversed(self.shape), reversed(self.stride)):
                rest, index = divmod(rest, size)
                offset += index * step
            found.append(offset)
        return found

    def addresses(self, positions: list[int]) -> list[int]:
        return [self.address + o * self.itemsize for o in self.offsets(positions)] if self.numel else []

    def values(self, raw: bytes | bytearray) -> list[float]:
        import torch

        if not raw:
            return []
        values = torch.frombuffer(bytearray(raw), dtype=self.dtype)
        return (values.abs() if values.is_complex() else values).double().tolist()

    def fetch(self, pid: int) -> Any:
        import torch

        if not self.numel:
            return torch.empty(self.shape, dtype=self.dtype)
        raw = torch.frombuffer(remote_memory.read(pid, self.address, self.nbytes), dtype=self.dtype)
        return raw.as_strided(self.shape, self.stride).clone()


def _ints(values: Any) -> bool:
    return isinstance(values, list) and all(type(v) is int and v >= 0 for v in values)


class FrozenSide:
    """The parent's hands on one timed child (reference or candidate)."""

    def __init__(self, session: ChildSession, reference: bool, max_output_bytes: int) -> None:
        if session.shared is None:
            raise SideFailure("the child was started without shared input slots")
        self.session, self.reference, self.max_output_bytes = session, reference, max_output_bytes
        self.shared: SharedSlots = session.shared  # its input slots, in a file the parent maps too
        self.pid: int | None = None
        self.slots: list[list[Any]] = []
        self.owned: list[tuple[int, int]] = []
        self.outputs: list[Any] = []  # the last batch's output descriptions, as the child sent them
        self.to_hold: list[list[int]] = []  # [handle, call of the last batch]: sent with the next `run`
        self.to_release: list[int] = []

    def prepare(self, count: int) -> None:
        """Have the child allocate `count` input slots (once; later calls only freeze it)."""
        if self.slots:
            self.session.freeze()
            return
        try:
            made = self.session.request(P.Slots(self.shared.layout[:count]))
        except P.MalformedReply as exc:
            raise SideFailure(f"unexpected reply to `slots`: {exc}") from None
        if len(made.slots) != count:
            raise SideFailure(f"unexpected reply to `slots`: {len(made.slots)} slots made of {count}")
        self.slots, self.owned = made.slots, [(a, a + n) for a, n in made.owned]
        self.pid = self.session.memory_pid()
        if self.pid is None:
            raise SideFailure("the child's process could not be found to read its memory")
        self.session.freeze()

    def write(self, slot: int, inputs: list[Any]) -> None:
        """Write one call's inputs into slot `slot` (the child is frozen)."""
        import torch

        for place, value in zip(self.shared.layout[slot], inputs):
            if place is not None and isinstance(value, torch.Tensor):
                self.shared.view(place, value).copy_(value)

    def batch(self, values: list[list[Any]], audit: P.Audit | None = None) -> tuple[int, dict[str, Any]]:
        """(nanoseconds, reply) of one batch of calls on `values` (one input list per call): write them while
        frozen, then clock, thaw, `run`, `done`, clock, freeze. `audit`: what an audit batch asks
        (harness/audits/)."""
        if len(values) > len(self.slots):
            raise SideFailure("more calls in a batch than input slots")
        for slot, inputs in enumerate(values):
            self.write(slot, inputs)
        command = P.Run(list(range(len(values))), self.to_hold, self.to_release, audit)
        self.to_hold, self.to_release = [], []
        elapsed, reply = self.session.timed(command, thaw=True)
        try:
            self.session.freeze()
        except OSError as exc:
            whose = "the reference's" if self.reference else "the candidate's"
            raise SideFailure(f"{whose} process could not be frozen after its batch ({exc})") from None
        outputs = reply.get("outputs")  # read here whatever the rest says: the caller reads the reply as a `Done`
        self.outputs = outputs if isinstance(outputs, list) and len(outputs) == len(values) else []
        return elapsed, reply

    def tensors(self, call: int) -> list[TensorAt | str]:
        """The call's output tensors, or for each that is not readable, why."""
        described = self.outputs[call] if call < len(self.outputs) else None
        if not isinstance(described, list):
            return ["no description of its outputs"]
        found: list[TensorAt | str] = []
        for item in described:
            try:
                found.append(TensorAt(item, self.max_output_bytes))
            except ValueError as exc:
                found.append(str(exc))
        return found

    def probe(self, calls: list[int], positions: list[list[int]]) -> list[Any]:
        """Per call: per output tensor, the values at `positions`; anything unreadable reads as a mismatch. One
        read per element size for the whole batch (a read per call cost more than the calls of a small kernel)."""
        wanted = [[(t, t.addresses(where)) if isinstance(t, TensorAt) else t for t in self.tensors(call)]
                  for call, where in zip(calls, positions)]
        raw: dict[int, bytearray] = {}
        readable = [item for call in wanted for item in call if isinstance(item, tuple)]
        for itemsize in {tensor.itemsize for tensor, _ in readable}:
            addresses = [a for tensor, found in readable if tensor.itemsize == itemsize for a in found]
            try:
                raw[itemsize] = remote_memory.gather(self.pid, addresses, itemsize)
            except remote_memory.RemoteMemoryError:
                return [self._probed_alone(call, where) for call, where in zip(calls, positions)]
        taken = dict.fromkeys(raw, 0)
        probed: list[Any] = []
        for call in wanted:
            values = []
            for item in call:
                if not isinstance(item, tuple):
                    values.append(item)
                    continue
                tensor, addresses = item
                start, end = taken[tensor.itemsize], taken[tensor.itemsize] + len(addresses) * tensor.itemsize
                taken[tensor.itemsize] = end
                values.append(tensor.values(raw[tensor.itemsize][start:end]))
            probed.append(values)
        return probed

    def _probed_alone(self, call: int, where: list[int]) -> Any:
        """One call's probe by itself, where the batch's read failed: only the unreadable call reads as wrong."""
        try:
            return [t.values(remote_memory.gather(self.pid, t.addresses(where), t.itemsize))
                    if isinstance(t, TensorAt) else t for t in self.tensors(call)]
        except remote_memory.RemoteMemoryError as exc:
            return str(exc)

    def values_at(self, tensors: list[TensorAt | str], positions: list[int]) -> list[Any]:
        """The values at `positions` of tensors described earlier (a held output), read now; unreadable: why."""
        try:
            return [t.values(remote_memory.gather(self.pid, t.addresses(positions), t.itemsize))
                    if isinstance(t, TensorAt) else t for t in tensors]
        except remote_memory.RemoteMemoryError as exc:
            return [str(exc)]

    def fetch(self, call: int) -> Any:
        """The call's whole output, read from the frozen child (a marker the comparison rejects where unreadable)."""
        tensors = self.tensors(call)
        try:
            values = [t.fetch(self.pid) if isinstance(t, TensorAt) else {UNSUPPORTED: t} for t in tensors]
        except remote_memory.RemoteMemoryError as exc:
            return {UNSUPPORTED: f"unreadable ({exc})"}
        return values[0] if len(values) == 1 else values

    def inputs_changed(self, slot: int, inputs: list[Any]) -> list[int]:
        """Which of the inputs written into `slot` no longer hold what was written."""
        import torch

        return [index for index, (place, value) in enumerate(zip(self.shared.layout[slot], inputs))
                if place is not None and isinstance(value, torch.Tensor)
                and not torch.equal(self.shared.view(place, value).reshape(-1).view(torch.uint8),
                                    value.contiguous().reshape(-1).view(torch.uint8))]

    def aliasing(self, calls: int) -> list[Finding]:
        """Outputs of the last batch that share memory with an input slot, the model's parameters or another
        call's output (a buffer reused from call to call: each call overwrites what the last returned)."""
        spans: list[tuple[int, tuple[int, int]]] = []
        for call in range(calls):
            spans += [(call, t.span) for t in self.tensors(call) if isinstance(t, TensorAt) and t.nbytes]
        inputs = [(p[0], p[0] + p[1]) for slot in self.slots for p in slot if isinstance(p, list) and len(p) == 2]
        for call, span in spans:
            if overlaps(span, inputs):
                return [Finding(Check.ALIASING, f"call {call} of a batch: an output shares memory with the inputs")]
            if overlaps(span, self.owned):
                return [Finding(Check.ALIASING, f"call {call} of a batch: an output shares memory with the model's "
                                "parameters or buffers")]
            if overlaps(span, [s for other, s in spans if other != call]):
                return [Finding(
                    Check.ALIASING, f"call {call} of a batch: an output shares memory with an earlier call's "
                    "output (a buffer reused from call to call, which each call overwrites)")]
        return []
