"""Every defence is load-bearing (issue 36): with it switched off (harness/defences.py, test-only), each attack
test that names it fails; with it on (the rest of the suite), they pass. A defence whose attack tests still pass
without it would be a test proving nothing."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from harness.defences import DEFENCES_OFF, KNOWN
from tests.conftest import REPO

pytestmark = pytest.mark.slow

ATTACKS = {
    "held_outputs": ["tests/harness/measurement/test_held_outputs.py::test_one_buffer_reused_after_the_trials_is_caught",
                     "tests/harness/measurement/test_held_outputs.py::test_a_ring_of_buffers_is_caught_too"],
    "fresh_factor": [
        "tests/harness/values/test_fresh_inputs.py::test_a_table_of_earlier_calls_cannot_answer_a_later_one",
        "tests/harness/values/test_fresh_inputs.py::test_an_estimate_from_known_bases_misses_the_fp32_tolerance"],
    "jail_hides_home": [
        "tests/harness/isolation/test_jail_contents.py::test_the_build_cache_and_the_home_show_nothing_of_others",
        "tests/harness/isolation/test_jail_contents.py::test_another_candidates_build_log_and_the_store_cannot_be_read"],
    "protocol_statement": [
        "tests/harness/measurement/test_protocol_statement.py::test_a_child_staged_speedup_says_so_and_strict_refuses_it"],
}


def test_every_switchable_defence_has_attack_tests() -> None:
    assert set(ATTACKS) == set(KNOWN)


@pytest.mark.parametrize("defence", sorted(ATTACKS))
def test_its_attack_tests_fail_without_it(defence: str) -> None:
    env = {**os.environ, DEFENCES_OFF: defence, "KERNELWRIGHT_TEST_STATIC_OFF": "1"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf", *ATTACKS[defence]],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 1, done.stdout[-3000:]
    for test in ATTACKS[defence]:
        assert f"FAILED {test}" in done.stdout, (test, done.stdout[-3000:])
