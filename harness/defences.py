"""Test-only switches that turn one defence off, so a test can show the attacks naming it succeed without it
(issue 36: every defence proven load-bearing). Read in the parent (the jail's own two are handed into the jailed
process's environment where they are off, since the jail imports nothing of ours: harness/isolation/sandbox.py), and
only where the test suite's switch (`KERNELWRIGHT_TEST_STATIC_OFF=1`) is set too: a user's environment cannot
weaken an evaluation by accident.

    KERNELWRIGHT_TEST_DEFENCES_OFF=held_outputs,fresh_factor,jail_hides_home

What holds where, and the switch that proves each defence: docs/defences.md.
"""

from __future__ import annotations

import os

from harness.policy import STATIC_OFF_SWITCH

DEFENCES_OFF = "KERNELWRIGHT_TEST_DEFENCES_OFF"
KNOWN = {
    "held_outputs": "outputs the caller holds are re-read after later batches (harness/measurement/held_outputs.py)",
    "fresh_factor": "every timed call's floats carry a fresh per-element factor (harness/values/fresh_inputs.py)",
    "jail_hides_home": "the jail covers kernelwright's home and the build cache (harness/isolation/session.py)",
    "protocol_statement": "a child-staged speedup says so and strict refuses it (harness/pipeline.py)",
    "trivial_canaries": "zeros, ones, the input passed through or a constant must fail every problem "
                        "(harness/verification/canaries.py)",
    "term_ablation": "every term and part of the reference must matter: the term canaries and the ablation check "
                     "(harness/verification/term_canaries.py, ablation.py; switched in canaries.py)",
    "jail_binds": "the jail's own /dev, private /tmp, /dev/shm and home folders, other scratch quotas hidden, "
                  "read-only file systems (harness/isolation/jail.py)",
    "jail_uid": "the jailed process runs as an unprivileged user (harness/isolation/jail.py)",
    "parent_slots": "the parent writes every call's inputs and reads its outputs, the children frozen "
                    "(harness/measurement/frozen_calls.py parent_driven)",
    "fresh_integers": "every timed call's integer and boolean inputs are redrawn (harness/values/fresh_inputs.py)",
    "probes": "every timed call's output is probed at secret positions (harness/measurement/timed_checks.py)",
    "knockout": "forward with every kernel function poisoned must not still answer (harness/pipeline.py)",
    "processes": "the candidate's process tree must not grow after it loaded: the parent counts its cgroup's "
                 "processes (harness/pipeline.py)",
    "freeze": "the candidate's process tree is frozen while the parent writes its inputs and reads its outputs, "
              "and while the other side is timed (harness/isolation/session.py ChildSession.freeze)",
}


def is_off(name: str) -> bool:
    if name not in KNOWN:
        raise ValueError(f"unknown defence {name!r}: one of {sorted(KNOWN)}")
    if os.environ.get(STATIC_OFF_SWITCH) != "1":
        return False
    return name in os.environ.get(DEFENCES_OFF, "").split(",")
