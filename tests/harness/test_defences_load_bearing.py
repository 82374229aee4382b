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
    "trivial_canaries": [
        "tests/harness/verification/test_canaries.py::test_a_trivial_answer_to_a_degenerate_problem_is_credited_nothing"],
    "term_ablation": [
        "tests/harness/verification/test_canaries.py::"
        "test_a_candidate_that_skips_a_term_under_the_tolerance_is_credited_nothing",
        "tests/harness/verification/test_ablation_budget.py::"
        "test_a_candidate_that_skips_the_small_term_of_a_slow_problem_is_credited_nothing"],
    "jail_binds": [
        "tests/harness/isolation/test_minimal_jail.py::test_only_the_listed_device_nodes_exist_and_private_folders_are_small",
        "tests/harness/isolation/test_minimal_jail.py::test_another_homes_scratch_quota_is_out_of_sight",
        "tests/harness/isolation/test_containment.py::test_other_scratch_folders_are_out_of_sight",
        "tests/harness/isolation/test_containment.py::"
        "test_only_its_own_folder_is_writable_so_the_store_and_build_cache_are_out_of_reach"],
    "jail_uid": [
        "tests/harness/isolation/test_minimal_jail.py::"
        "test_it_runs_as_an_unprivileged_user_and_root_only_files_stay_closed"],
    "parent_slots": ["tests/harness/measurement/test_timing_protocol.py::"
                     "test_no_inputs_reach_the_process_outside_the_timed_interval"],
    "fresh_integers": ["tests/harness/measurement/test_timing_protocol.py::test_integer_inputs_are_fresh_in_every_timed_call"],
    "probes": ["tests/harness/test_exploits.py::test_skipping_a_few_elements_only_while_timed_is_caught_by_the_probes_alone"],
    "processes": ["tests/harness/measurement/test_freeze.py::test_a_helper_process_is_counted_by_the_parent"],
    "knockout": ["tests/harness/test_exploits.py::"
                 "test_a_ghost_branch_that_never_uses_its_kernel_on_measured_shapes_is_rejected",
                 "tests/harness/test_audits_among_timed_calls.py::"
                 "test_a_kernel_on_the_output_path_only_for_the_first_calls_is_a_ghost_on_the_timed_ones"],
    "freeze": ["tests/harness/measurement/test_freeze.py::"
               "test_a_helper_process_that_answers_while_the_inputs_are_written_gains_nothing"],
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
