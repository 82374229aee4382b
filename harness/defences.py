"""Test-only switches that turn one defence off, so a test can show the attacks naming it succeed without it
(issue 36: every defence proven load-bearing). Read in the parent (the jail's own two are handed into the jailed
process's environment where they are off, since the jail imports nothing of ours: harness/isolation/sandbox.py), and
only where the test suite's switch (`KERNELWRIGHT_TEST_STATIC_OFF=1`) is set too: a user's environment cannot
weaken an evaluation by accident.

    KERNELWRIGHT_TEST_DEFENCES_OFF=held_outputs,fresh_factor,jail_hides_home

What holds where, and the switch that proves each defence: docs/defences.md (generated from the registry).
"""

from __future__ import annotations

import os

from harness.checks import switches
from harness.policy import STATIC_OFF_SWITCH

DEFENCES_OFF = "KERNELWRIGHT_TEST_DEFENCES_OFF"
KNOWN = switches()  # each row of the registry (harness/checks.py) with a switch: its name and what it turns off


def is_off(name: str) -> bool:
    if name not in KNOWN:
        raise ValueError(f"unknown defence {name!r}: one of {sorted(KNOWN)}")
    if os.environ.get(STATIC_OFF_SWITCH) != "1":
        return False
    return name in os.environ.get(DEFENCES_OFF, "").split(",")
