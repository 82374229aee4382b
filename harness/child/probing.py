"""The child's reading commands, on CUDA where the parent cannot read the child's memory itself: `probe` (values at
parent-chosen positions of the last batch's outputs, right after the clock stopped) and `outputs` (whole outputs
saved for the parent to compare in full)."""

from __future__ import annotations

from harness.isolation import protocol as P
from harness.values.integrity import flatten
from harness.values.tensors import portable, values_at


class Probing:
    """`probe`, `outputs` (handlers of harness/child/main.py's Child)."""

    def do_probe(self, command: P.Probe) -> P.Probed:
        """Values at parent-chosen positions of the last batch's outputs, read right after the clock stopped."""
        import torch

        values = []
        for index, positions in zip(command.calls, command.positions):
            tensors = [t for t in flatten(self.outputs[index]) if t is not None]
            # anything but a plain tensor (a subclass could compute on being read) reads as a mismatch
            values.append([values_at(t, positions) if type(t) is torch.Tensor else type(t).__name__ for t in tensors])
        return P.Probed(values)

    def do_outputs(self, command: P.Outputs) -> P.Status:
        import torch

        torch.save([portable(self.outputs[i]) for i in command.calls], self.scratch / command.file)
        return P.Status()
