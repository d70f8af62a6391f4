"""comparisons.statistics.stats against answers computed here by other means (no Django)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from comparisons.statistics import stats

pytestmark = pytest.mark.sqlite_only("no database: comparisons.statistics.stats is numerics on lists")


def test_bootstrap_interval_matches_a_direct_numpy_resampling_with_the_same_seed():
    rng = np.random.default_rng(42)
    baseline = rng.uniform(0, 1, 30)
    candidate = np.clip(baseline + rng.normal(0.05, 0.2, 30), 0, 1)
    # One block of resamples: the same draws as a single numpy call with the same seed.
    idx = np.random.default_rng(7).integers(0, 30, size=(1000, 30))
    means = (candidate - baseline)[idx].mean(axis=1)
    expected = np.percentile(means, [2.5, 97.5])

    low, high = stats.paired_bootstrap_ci(baseline, candidate, resamples=1000, seed=7)

    assert (low, high) == pytest.approx(tuple(expected))


def test_bootstrap_interval_is_reproducible_under_its_seed_and_changes_with_another():
    rng = np.random.default_rng(1)
    baseline, candidate = rng.uniform(size=200), rng.uniform(size=200)
    first = stats.paired_bootstrap_ci(baseline, candidate, seed=3)
    again = stats.paired_bootstrap_ci(baseline, candidate, seed=3)
    other = stats.paired_bootstrap_ci(baseline, candidate, seed=4)
    assert first == again
    assert first != other


def test_bootstrap_interval_agrees_with_scipy_percentile_bootstrap():
    rng = np.random.default_rng(5)
    baseline = rng.uniform(size=300)
    candidate = np.clip(baseline + rng.normal(0.03, 0.15, 300), 0, 1)
    diffs = candidate - baseline
    reference = scipy_stats.bootstrap(
        (diffs,), np.mean, n_resamples=10_000, method="percentile", confidence_level=0.95, random_state=9
    ).confidence_interval
    low, high = stats.paired_bootstrap_ci(baseline, candidate, resamples=10_000, seed=0)
    assert low == pytest.approx(reference.low, abs=0.005)
    assert high == pytest.approx(reference.high, abs=0.005)


def test_bootstrap_of_no_tasks_has_no_interval():
    assert stats.paired_bootstrap_ci([], []) is None


def _exact_mcnemar(b: int, c: int) -> float:
    n = b + c
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n
    return min(1.0, 2 * tail)


@pytest.mark.parametrize(("to_fail", "to_pass"), [(0, 6), (1, 8), (3, 3), (5, 2), (0, 1), (10, 25)])
def test_mcnemar_is_the_exact_two_sided_binomial_on_discordant_pairs(to_fail, to_pass):
    assert stats.mcnemar_exact(to_fail, to_pass) == pytest.approx(_exact_mcnemar(to_fail, to_pass))


def test_mcnemar_without_flips_is_one():
    assert stats.mcnemar_exact(0, 0) == 1.0


@pytest.mark.parametrize(("k", "n"), [(7, 20), (0, 5), (5, 5), (45, 100)])
def test_wilson_interval_matches_the_textbook_formula(k, n):
    z = scipy_stats.norm.ppf(0.975)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    low, high = stats.proportion_ci(k, n)
    assert low == pytest.approx(max(0.0, centre - half))
    assert high == pytest.approx(min(1.0, centre + half))


@pytest.mark.parametrize(("n", "c", "k"), [(5, 2, 1), (5, 2, 3), (6, 0, 2), (4, 4, 2), (7, 3, 5)])
def test_pass_at_k_equals_the_share_of_k_subsets_with_a_pass(n, c, k):
    attempts = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    expected = sum(any(attempts[i] for i in s) for s in subsets) / len(subsets)
    assert stats.pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_needs_k_attempts():
    assert stats.pass_at_k(2, 1, 3) is None


def test_agentv_gain_and_outcomes():
    assert stats.normalized_gain(0.5, 0.75) == pytest.approx(0.5)
    assert stats.normalized_gain(1.0, 0.9) is None
    assert stats.win_loss_tie(0.16) == "win"
    assert stats.win_loss_tie(-0.2) == "loss"
    assert stats.win_loss_tie(0.05) == "tie"
