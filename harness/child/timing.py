"""The child's timing commands; the parent holds the clock around `go` and `run`.

On CUDA (or a CPU without a freezer) the child stages each batch's fresh inputs from the parent's recipes
(`stage`), runs them back to back (`go`) and is probed by request (harness/child/probing.py). On the CPU the parent
writes every call's inputs into shared slots itself while this process is frozen (`slots` once, then `run` per
batch) and reads the outputs from its memory (harness/measurement/frozen_calls.py)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

from harness.child import calls as C
from harness.child.process import CandidateFailure
from harness.isolation import protocol as P
from harness.values.integrity import flatten, thread_state
from harness.values.precision import precision_settings
from harness.values.tensors import NOT_PLAIN


def describe_output(output: Any) -> list[Any]:
    """Where each tensor of one call's output lies, for the parent to read itself: [address, dtype, shape,
    strides, storage start, storage bytes, plain] per tensor; anything else by its type's name."""
    import torch

    described: list[Any] = []
    for item in flatten(output):
        if not isinstance(item, torch.Tensor):
            described.append(type(item).__name__)
            continue
        if item.device.type == "meta" or item.layout != torch.strided:
            described.append(f"{NOT_PLAIN} ({item.layout}, {item.device.type})")
            continue
        storage = item.untyped_storage()
        described.append([item.data_ptr(), str(item.dtype).removeprefix("torch."), list(item.shape),
                          list(item.stride()), storage.data_ptr(), storage.nbytes(),
                          type(item) is torch.Tensor and item.device.type == "cpu"])
    return described


def warm_device_timing(device: str) -> None:
    """Start, outside any candidate call, the driver threads the harness's own CUDA timing may start (timing events,
    their elapsed time, a device-wide sync, NVML): a thread the driver starts on the first timed batch is not work
    that outlives a call (an honest ReLU read `threads grew from 2 to 3 while being timed` on an H100, 2026-11-27)."""
    if device != "cuda":
        return
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    scratch = torch.empty(1 << 20, dtype=torch.int32, device="cuda")
    start.record()
    scratch.zero_()
    end.record()
    end.synchronize()
    start.elapsed_time(end)
    torch.cuda.synchronize()
    try:
        from harness.feedback.nvml import snapshot

        snapshot()
    except Exception:  # telemetry is optional; the thread count is what matters here
        pass


def make_flusher(device: str) -> Callable[[], None]:
    """On CUDA, evict L2 before each timed call (as triton's do_bench does): inputs and weights come from DRAM."""
    if device != "cuda":
        return lambda: None
    import torch

    l2_bytes = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 * 2**20)
    buffer = torch.empty(max(2 * l2_bytes, 64 * 2**20) // 4, dtype=torch.int32, device="cuda")

    def flush() -> None:  # queued on the current stream ahead of the call: no host sync between calls
        buffer.zero_()

    return flush


class TimedCalls:
    """`stage`, `go`, `slots`, `run` (handlers of harness/child/main.py's Child)."""

    def _timing_starts(self, phase: str = "timing") -> None:
        """Once, at the first timing command (`slots` on the CPU: the checked calls come next, made the same way
        as the timed ones): the threads and telemetry before them, the phase marker."""
        if self.timing_started:
            return
        self.timing_started = True
        if "after_correctness" not in self.threads:
            warm_device_timing(self.job.device)
            self.threads["after_correctness"] = thread_state()
        self.settings.setdefault("after_correctness", precision_settings())
        if self.job.device == "cuda":
            from harness.feedback.nvml import snapshot

            self.result.telemetry = {"before": snapshot()}
        self.events.write(phase=phase)

    # -- the child stages its inputs (CUDA) ------------------------------------------------------------------

    def do_stage(self, command: P.Stage) -> P.Staged:
        """Fresh input sets for the next batch, made on the device (from device-resident trial inputs and pools)
        before the parent's clock starts."""
        from harness.values.fresh_inputs import fresh_inputs, make_pools
        from harness.values.tensors import to_device

        self._timing_starts()
        if self.pools is None:
            self.pools = to_device(make_pools(self.payload["trials"][0]["inputs"], self.job.pool_seed),
                                   self.job.device)
            self.bases = [to_device(trial["inputs"], self.job.device) for trial in self.payload["trials"]]
            self.flush = make_flusher(self.job.device)
        self.staged = [fresh_inputs(self.bases[trial], self.pools, recipe, self.job.device)
                       for trial, recipe in command.calls]
        self.outputs = []
        C.sync(self.job.device)
        return P.Staged(len(self.staged))

    def do_go(self, command: P.Go) -> P.Done:
        """The staged calls back to back, one device sync at the end. On CUDA, L2 is flushed on the device before
        each call and CUDA events bracket each call (reported; the parent's clock over the batch checks them)."""
        before, audit = self.switch.calls, command.audit
        if self.job.device != "cuda":
            own_ns, found = self._calls(self.staged, audit)
            C.sync(self.job.device)
            self.kernel_calls["timed"] += self.switch.calls - before
            return P.Done(len(self.outputs), own_ns=own_ns, poisoned=self._poisoned(audit), census=found)
        import torch

        marks = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in self.staged]
        self.outputs = []
        poison, census = _poison(audit), audit is not None and audit.census
        self.switch.auditing = census or poison is not None
        try:
            with self._census(census) as found:
                for index, (inputs, (start, end)) in enumerate(zip(self.staged, marks)):
                    self.flush()
                    start.record()
                    self.outputs.append(self._call(inputs, index == poison))
                    end.record()
                # every stream of the device finishes before the next call starts: work a candidate queues on a
                # side stream (or a stream per call) cannot overlap later calls, so the parent's clock over the
                # batch holds all of it and `believed_samples` sees it as wall time outside the events
                C.DEVICE_SYNC()
        finally:
            self.switch.auditing = False
        self.kernel_calls["timed"] += self.switch.calls - before
        return P.Done(len(self.outputs), event_ms=[start.elapsed_time(end) for start, end in marks],
                      poisoned=self._poisoned(audit), census=found if census else None)

    # -- the audits among timed calls: one call knocked out, one batch's kernel time summed ------------------

    def _call(self, inputs: list[Any], poisoned: bool) -> Any:
        """One call; the knock-out's with every kernel function poisoned (raising then only says it depends on
        them: its output reads as wrong, None)."""
        if not poisoned:
            return C.call(self.model, inputs)
        self.switch.poison = True
        try:
            return C.call(self.model, inputs)
        except Exception:
            return None
        finally:
            self.switch.poison = False

    def _calls(self, batch: list[list[Any]], audit: P.Audit | None) -> tuple[int | None, dict[str, Any] | None]:
        """forward() on each input set into `self.outputs`; an audit batch (harness/audits/): the knock-out's call
        poisoned, with the share's clock the nanoseconds inside the candidate's kernel functions (CPU: its calls are
        synchronous), with the census the operators run outside them."""
        poison, clock, census = _poison(audit), audit is not None and audit.clock, audit is not None and audit.census
        self.outputs = []
        self.switch.clocked, before = clock, self.switch.own_s
        self.switch.auditing = clock or census or poison is not None
        try:
            with self._census(census) as found:
                for index, inputs in enumerate(batch):
                    self.outputs.append(self._call(inputs, index == poison))
        finally:
            self.switch.clocked = self.switch.auditing = False
        return (int((self.switch.own_s - before) * 1e9) if clock and self.job.device != "cuda" else None,
                found if census else None)

    @contextmanager
    def _census(self, on: bool) -> Iterator[dict[str, Any]]:
        if not on:
            yield {}
            return
        from harness.child.census import counting

        with counting(lambda: self.switch.depth, False) as found:
            self.switch.own_modes = 1  # the census's own mode is no disguise
            try:
                yield found
            finally:
                self.switch.own_modes = 0

    def _poisoned(self, audit: P.Audit | None) -> bool | None:
        return None if _poison(audit) is None else self.switch.wrapped > 0

    # -- the parent's hands: it writes the slots and reads the outputs (measurement/frozen_calls.py) -----------

    def do_slots(self, command: P.Slots) -> P.SlotsMade:
        """Input sets the parent fills while this process is frozen, over the shared file at the parent's layout:
        where each lies ([address, bytes] per tensor input, None for the rest) and the memory of the model's
        parameters, which no output may share."""
        import torch

        from harness.isolation.shared_slots import child_slots

        if self.slots_fd is None:
            raise CandidateFailure("crash", "slots asked of a child started without a shared slots file")
        self._timing_starts("calls")
        template = self.payload.get("template") or self.payload["trials"][0]["inputs"]  # shapes and dtypes
        self.slots = child_slots(self.slots_fd, command.layout, template)
        owned = list(self.model.parameters()) + list(self.model.buffers())
        return P.SlotsMade(slots=[[[v.data_ptr(), v.numel() * v.element_size()] if isinstance(v, torch.Tensor)
                                   else None for v in inputs] for inputs in self.slots],
                           owned=[[t.untyped_storage().data_ptr(), t.untyped_storage().nbytes()] for t in owned])

    def do_run(self, command: P.Run) -> P.Done:
        """forward() on each named slot, then a device sync; the outputs stay alive (the parent reads them while
        this process is frozen) until the next `run`. The reply only says where they are."""
        for handle in command.release or []:  # outputs the caller let go of: their memory may be reused
            self.held.pop(handle, None)
        for handle, index in command.hold or []:  # outputs of the last batch the caller keeps (a program
            self.held[handle] = self.outputs[index]  # still holding a result): their memory must stay as it is
        self.outputs = []  # the previous batch's outputs are released first, the same way before every batch
        before = self.switch.calls
        own_ns, found = self._calls([self.slots[index] for index in command.slots], command.audit)
        C.sync(self.job.device)
        self.kernel_calls["timed"] += self.switch.calls - before
        return P.Done(len(self.outputs), outputs=[describe_output(o) for o in self.outputs],
                      kernel_calls=self.switch.calls - before, own_ns=own_ns, poisoned=self._poisoned(command.audit),
                      census=found)


def _poison(audit: P.Audit | None) -> int | None:
    return audit.poison if audit is not None else None
