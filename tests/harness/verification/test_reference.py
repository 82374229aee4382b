"""The parent's reference (harness/verification/reference.py): the same seeds give the same model and inputs, even when
other threads compute references at the same time (a prebuild beside an evaluation)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import torch

from harness.verification.reference import run_reference
from kernelbench.problem import Problem

SLOW_INIT = """
import time
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        time.sleep(0.2)  # between the harness's manual_seed and this draw, another thread could seed
        self.w = nn.Parameter(torch.rand(8))

    def forward(self, x):
        return x * self.w

def get_inputs():
    return [torch.rand(8)]

def get_init_inputs():
    return []
"""


def test_concurrent_references_keep_their_own_seeds() -> None:
    problem = Problem(name="slow_init", source=SLOW_INIT)
    alone = {seed: run_reference(problem, "cpu", seed, [seed + 1]) for seed in (11, 22)}
    with ThreadPoolExecutor(2) as pool:
        together = dict(zip((11, 22), pool.map(lambda s: run_reference(problem, "cpu", s, [s + 1]), (11, 22))))
    assert not torch.equal(alone[11].model.w, alone[22].model.w)
    for seed in (11, 22):
        assert torch.equal(together[seed].model.w, alone[seed].model.w)
        assert torch.equal(together[seed].outputs[0], alone[seed].outputs[0])


LOG_OF_RELU = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.log(torch.relu(x))

def get_inputs():
    return [torch.randn(16, 16384)]

def get_init_inputs():
    return []
"""


def test_a_reference_that_gives_minus_inf_is_judged_not_refused() -> None:
    """log of zeros is -inf: the trials keep it (each distribution's too), with a note saying how it is compared."""
    run = run_reference(Problem(name="log_relu", source=LOG_OF_RELU), "cpu", 1, [2, 3, 4, 5, 6])
    assert all(bool(torch.isneginf(output).any()) for output in run.outputs)
    assert any(note.check == "non-finite" for note in run.notes)
    assert "default" in run.distributions and len(set(run.distributions)) > 1
