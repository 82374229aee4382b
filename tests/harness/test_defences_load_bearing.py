"""Every defence is load-bearing (issue 36): with it switched off (harness/defences.py, test-only), each attack
test marked as proving its check fails; with it on (the rest of the suite), they pass. A defence whose attack tests
still pass without it would be a test proving nothing."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from harness.checks import ROWS
from harness.defences import DEFENCES_OFF
from tests.conftest import REPO
from tests.harness.proofs import proofs

pytestmark = pytest.mark.slow

# each switch's attack tests: the tests marked `@pytest.mark.proves(Check.X)` for the registry row that has it
ATTACKS = {row.switch: proofs().get(row.tag, []) for row in ROWS if row.switch is not None}


# a defence in depth behind another: proven where the outer one is off (the jail's own root never binds kernelwright's
# home, so hiding it matters only in the read-only view of the host the jail falls back to)
BEHIND = {"jail_hides_home": ["jail_root"]}


@pytest.mark.parametrize("defence", sorted(ATTACKS))
def test_its_attack_tests_fail_without_it(defence: str) -> None:
    env = {**os.environ, DEFENCES_OFF: ",".join([defence, *BEHIND.get(defence, [])]),
           "KERNELWRIGHT_TEST_STATIC_OFF": "1"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf", *ATTACKS[defence]],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 1, done.stdout[-3000:]
    for test in ATTACKS[defence]:
        assert f"FAILED {test}" in done.stdout, (test, done.stdout[-3000:])
