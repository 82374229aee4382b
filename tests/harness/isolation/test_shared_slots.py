"""Input slots shared by the parent and a timed child (harness/isolation/shared_slots.py)."""

from __future__ import annotations

import os

import pytest
import torch

from harness.isolation.shared_slots import SharedSlots, child_slots, supported

pytestmark = pytest.mark.skipif(not supported(), reason="no sealable memfd here")


def test_what_the_parent_writes_is_what_the_child_reads() -> None:
    inputs = [torch.randn(3, 5), torch.randint(0, 9, (7,)), 4, torch.tensor(2.5)]
    shared = SharedSlots(inputs, count=3)
    try:
        fresh = [[torch.randn(3, 5), torch.randint(0, 9, (7,)), 4, torch.tensor(float(k))] for k in range(3)]
        for slot, values in enumerate(fresh):
            for place, value in zip(shared.layout[slot], values):
                if place is not None:
                    shared.view(place, value).copy_(value)
        seen = child_slots(os.dup(shared.fd), shared.layout, inputs)
        for got, want in zip(seen, fresh):
            assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]) and got[2] == 4
            assert torch.equal(got[3], want[3]) and got[3].shape == ()
        assert all(place[0] % 64 == 0 for slot in shared.layout for place in slot if place)
    finally:
        shared.close()


def test_the_child_cannot_resize_the_file_under_the_parents_mapping() -> None:
    """A shrunk file would make the parent's next write fault (SIGBUS): the file is sealed."""
    shared = SharedSlots([torch.zeros(1024)], count=2)
    try:
        with pytest.raises(PermissionError):
            os.ftruncate(shared.fd, 0)
        with pytest.raises(PermissionError):
            os.ftruncate(shared.fd, shared.nbytes * 2)
    finally:
        shared.close()
