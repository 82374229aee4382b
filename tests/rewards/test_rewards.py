import math
import random

import pytest

from rewards import reward, select_exemplars
from rewards.exemplars import bucket_of
from rewards.reward import CEILING, FLOOR, reward_of


@pytest.mark.parametrize("verdict, speedup, expected", [
    ("accepted", 1.0, 1.0), ("accepted", 2.0, 2.0), ("accepted", 8.0, 4.0), ("accepted", 1000.0, CEILING),
    ("accepted", 0.25, FLOOR), ("incorrect", 50.0, 0.0), ("rejected", 3.0, 0.0), ("accepted", None, 0.0),
    ("accepted", math.nan, 0.0), ("timeout", None, 0.0),
])
def test_the_point_reward_is_log_scaled_clipped_and_zero_unless_accepted(verdict, speedup, expected) -> None:
    assert reward(verdict, speedup, definition="point") == pytest.approx(expected)


def test_reward_of_a_stored_record() -> None:
    assert reward_of({"verdict": "accepted", "speedup": 4.0}, "point") == pytest.approx(3.0)
    assert reward_of({"verdict": "accepted", "speedup": 4.0, "speedup_ci": [3.5, 4.5],
                      "speedup_significant": True}) == pytest.approx(1 + math.log2(3.5))
    assert reward_of({"verdict": "incorrect", "speedup": 4.0, "speedup_ci": [3.5, 4.5]}) == 0.0


def test_a_speedup_its_interval_does_not_support_earns_no_more_than_parity() -> None:
    """The issue's example: 1.32x with an interval of 0.78-1.97x earned 1.40 on the point estimate."""
    assert reward("accepted", 1.32, (0.78, 1.97), definition="point") == pytest.approx(1.40, abs=0.01)
    noisy = reward("accepted", 1.32, (0.78, 1.97), False)
    assert noisy <= 1.0 and noisy == pytest.approx(1 + math.log2(0.78))
    assert reward("accepted", 1.32, (0.78, 1.97)) == noisy  # the interval alone decides it too
    assert reward("accepted", 1.32) == 1.0  # no interval: nothing shows the speedup is not noise
    assert reward("accepted", 1.32, (1.1, 1.5), significant=False) == 1.0  # the harness's own word wins
    assert reward("accepted", 0.5) == pytest.approx(FLOOR)  # a slower kernel still beats a wrong one


def test_a_significant_speedup_earns_its_lower_bound() -> None:
    assert reward("accepted", 3.0, (2.0, 4.0), True) == pytest.approx(2.0)
    assert reward("accepted", 3.0, (2.0, 4.0), True) < reward("accepted", 3.0, definition="point")
    assert reward("accepted", 1000.0, (500.0, 2000.0), True) == CEILING
    assert reward("rejected", 3.0, (2.0, 4.0), True) == 0.0
    assert reward("accepted", 3.0, (math.nan, 4.0), True) == 1.0  # an unusable bound is no evidence


def test_an_unknown_definition_is_named() -> None:
    with pytest.raises(ValueError, match="interval, point"):
        reward("accepted", 2.0, definition="optimistic")


ITEMS = [("a", 0.3), ("b", 0.7), ("c", 1.0), ("d", 1.5), ("e", 3.0), ("f", 3.5), ("g", 9.0)]


def test_exemplars_come_from_distinct_buckets_spread_over_the_range() -> None:
    chosen = select_exemplars(ITEMS, k=3, temperature=0.0)
    buckets = [bucket_of(s) for _, s in chosen]
    assert len(set(buckets)) == 3
    assert ("a", 0.3) in chosen and ("g", 9.0) in chosen  # the slowest and the fastest bucket


def test_zero_temperature_takes_the_fastest_in_a_bucket_and_high_samples() -> None:
    same_bucket = [("x", 2.1), ("y", 3.9)]
    assert select_exemplars(same_bucket, k=1, temperature=0.0) == [("y", 3.9)]
    draws = {select_exemplars(same_bucket, k=1, temperature=100.0, rng=random.Random(seed))[0][0]
             for seed in range(40)}
    assert draws == {"x", "y"}


def test_exemplar_edge_cases() -> None:
    assert select_exemplars([], k=3) == []
    assert select_exemplars(ITEMS, k=0) == []
    assert select_exemplars([("bad", 0.0), ("nan", math.nan)], k=2) == []
    assert len(select_exemplars(ITEMS, k=10)) == len({bucket_of(s) for _, s in ITEMS})


def test_the_accepted_verdict_rewards_reads_is_the_harness_one() -> None:
    """rewards imports nothing of ours, so it names the one verdict it pays for itself: it must stay the harness's."""
    from harness.records import Verdict
    from rewards.reward import ACCEPTED

    assert ACCEPTED == Verdict.ACCEPTED.value
