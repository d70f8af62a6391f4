"""The statistics behind a comparison: plain numpy and the stdlib, no Django.

Every function takes plain numbers or arrays and returns plain floats, so the service
can put the results straight into JSON and the tests can check them independently.
"""

from __future__ import annotations

from math import comb, sqrt
from statistics import NormalDist

import numpy as np

# The normal quantile (scipy.special.ndtri's to an ulp): importing scipy.special was 0.4-1.2 s of a first page.
normal_quantile = NormalDist().inv_cdf

CONFIDENCE = 0.95
# Resamples are drawn in blocks so 10,000 x 1,000 tasks never needs one 80 MB index array.
_BOOTSTRAP_BLOCK = 1_000


def paired_bootstrap_ci(
    baseline: np.ndarray | list[float],
    candidate: np.ndarray | list[float],
    *,
    resamples: int = 10_000,
    seed: int = 0,
    confidence: float = CONFIDENCE,
) -> tuple[float, float] | None:
    """Percentile interval of mean(candidate - baseline), resampling tasks with replacement.

    The two arrays are paired: position i is the same task on both sides (each value is
    that task's mean over attempts). The same seed always gives the same interval.
    """
    diffs = np.asarray(candidate, dtype=float) - np.asarray(baseline, dtype=float)
    n = diffs.size
    if n == 0 or resamples <= 0:
        return None
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    for start in range(0, resamples, _BOOTSTRAP_BLOCK):
        size = min(_BOOTSTRAP_BLOCK, resamples - start)
        idx = rng.integers(0, n, size=(size, n))
        means[start : start + size] = diffs[idx].mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def mcnemar_exact(baseline_only: int, candidate_only: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pairs.

    baseline_only: tasks that pass on the baseline and fail on the candidate; candidate_only:
    the reverse. Under "no difference" each flip goes either way with probability 1/2.
    """
    flips = baseline_only + candidate_only
    if flips == 0 or baseline_only == candidate_only:
        return 1.0
    # Binomial(flips, 1/2) is symmetric: twice the smaller tail, summed exactly in integers.
    term = tail = 1
    for i in range(min(baseline_only, candidate_only)):
        term = term * (flips - i) // (i + 1)
        tail += term
    return min(1.0, 2 * tail / 2**flips)


def proportion_ci(successes: int, total: int) -> tuple[float, float] | None:
    """95% Wilson interval of a pass rate (Newcombe's formula, as scipy's binomtest(...).proportion_ci)."""
    if total <= 0:
        return None
    p = successes / total
    z = normal_quantile(0.5 + 0.5 * CONFIDENCE)
    denom = 2 * (total + z**2)
    centre = (2 * total * p + z**2) / denom
    delta = z / denom * sqrt(4 * total * p * (1 - p) + z**2)
    low = 0.0 if successes == 0 else centre - delta
    high = 1.0 if successes == total else centre + delta
    return float(low), float(high)


def pass_at_k(n: int, c: int, k: int) -> float | None:
    """Unbiased pass@k for one task: n attempts, c of them passed (Chen et al., 2021)."""
    if k <= 0 or n < k:
        return None
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def mean_or_none(values: list[float] | np.ndarray) -> float | None:
    arr = np.asarray(values, dtype=float)
    return float(arr.mean()) if arr.size else None


def standard_error(values: list[float] | np.ndarray) -> float | None:
    """The standard error of a mean, sd (n - 1) / sqrt(n); None under two values."""
    arr = np.asarray(values, dtype=float)
    return float(arr.std(ddof=1) / sqrt(arr.size)) if arr.size >= 2 else None


def normalized_gain(score1: float, score2: float) -> float | None:
    """AgentV's g = (score2 - score1) / (1 - score1); undefined when the baseline is perfect."""
    if score1 >= 1.0:
        return None
    return (score2 - score1) / (1.0 - score1)


def win_loss_tie(delta: float, threshold: float = 0.1) -> str:
    """AgentV's classification of one matched pair."""
    if delta >= threshold:
        return "win"
    if delta <= -threshold:
        return "loss"
    return "tie"


def bootstrap_means(columns: np.ndarray, *, resamples: int = 10_000, seed: int = 0) -> np.ndarray:
    """Bootstrap means of several columns at once, resampling rows (tasks) with replacement.

    `columns` is tasks x k. Every column sees the same resampled tasks, drawn exactly as
    `paired_bootstrap_ci` draws them, so a delta column gives that function's interval.
    Returns resamples x k means. Counting each task's draws and multiplying by the columns
    costs one pass for all k columns (the grid's 10 sides and 9 deltas share it).
    """
    values = np.asarray(columns, dtype=float)
    n = values.shape[0]
    rng = np.random.default_rng(seed)
    means = np.empty((resamples, values.shape[1]))
    for start in range(0, resamples, _BOOTSTRAP_BLOCK):
        size = min(_BOOTSTRAP_BLOCK, resamples - start)
        idx = rng.integers(0, n, size=(size, n))
        rows = np.repeat(np.arange(size) * n, n)
        counts = np.bincount(idx.ravel() + rows, minlength=size * n).reshape(size, n)
        means[start : start + size] = counts @ values / n
    return means


def mean_intervals(
    columns: list[np.ndarray], *, resamples: int = 10_000, seed: int = 0
) -> list[tuple[float, float] | None]:
    """CI95 of each column's mean over the rows (tasks) it has; NaN marks a row it lacks.

    Columns that lack the same rows (all of them, when sides share their tasks) share one
    bootstrap: the same resampled tasks, one pass (`bootstrap_means`).
    """
    groups: dict[bytes, list[int]] = {}
    for i, column in enumerate(columns):
        groups.setdefault(np.isnan(column).tobytes(), []).append(i)
    out: list[tuple[float, float] | None] = [None] * len(columns)
    for members in groups.values():
        keep = ~np.isnan(columns[members[0]])
        if resamples <= 0 or not keep.any():
            continue
        block = np.column_stack([columns[i][keep] for i in members])
        samples = bootstrap_means(block, resamples=resamples, seed=seed)
        for j, i in enumerate(members):
            out[i] = percentile_interval(samples[:, j])
    return out


def percentile_interval(samples: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(samples, [tail, 100 - tail])
    return float(low), float(high)


def holm(pvalues: list[float]) -> list[float]:
    """Holm's step-down adjustment of a family of p-values (same order as given).

    Sorted ascending, the i-th smallest (from 0) is multiplied by (m - i); each adjusted
    value is at least the one before it and at most 1. statsmodels' `multipletests(...,
    method="holm")` gives the same numbers; it is not a dependency for one loop.
    """
    m = len(pvalues)
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(sorted(range(m), key=lambda j: pvalues[j])):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


# --------------------------------------------------------------------------------------
# What a paired sample can detect
# --------------------------------------------------------------------------------------

ALPHA, POWER = 0.05, 0.80


def power_z(alpha: float = ALPHA, power: float = POWER) -> float:
    """z(1 - alpha/2) + z(power): 1.96 + 0.84 = 2.80 at alpha 0.05 and 80% power."""
    return normal_quantile(1 - alpha / 2) + normal_quantile(power)


def paired_mde(sd_diff: float, n: int, *, alpha: float = ALPHA, power: float = POWER) -> float | None:
    """Minimum detectable effect of a paired mean difference (two-sided, normal approximation):
    (z(1 - alpha/2) + z(power)) * sd(d) / sqrt(n), d being the per-task differences."""
    if n < 2:
        return None
    return power_z(alpha, power) * sd_diff / np.sqrt(n)


def sample_plan(diffs: np.ndarray, attempt_var: np.ndarray, attempts: float, delta: float | None) -> dict[str, object]:
    """The MDE of the paired design as sampled, and what would bring it down to |delta|.

    `diffs` are the per-task differences of attempt means; `attempt_var` per task, the variance
    of one attempt on each side added (s2_ref + s2_side; NaN where a side has one attempt);
    `attempts` the attempts per task (median). var(d) = tau2 + W / k: the tasks' own spread
    (tau2) and the attempts' noise (W = mean attempt_var, over k attempts). With k' attempts
    per task MDE(k') = z * sqrt((tau2 + W / k') / n); with n' tasks, z * sd(d) / sqrt(n').
    """
    n = int(diffs.size)
    sd = float(np.std(diffs, ddof=1)) if n >= 2 else 0.0
    mde = paired_mde(sd, n)
    plan: dict[str, object] = {"mde": mde, "more_attempts_per_task": None, "more_tasks": None}
    if mde is None or delta is None or abs(delta) < 1e-12 or mde <= abs(delta):
        if mde is not None and delta is not None and mde <= abs(delta):
            plan["more_attempts_per_task"] = plan["more_tasks"] = 0
        return plan
    z = power_z()
    plan["more_tasks"] = max(0, int(np.ceil((z * sd / abs(delta)) ** 2)) - n)
    known = attempt_var[~np.isnan(attempt_var)]
    if known.size and attempts >= 2:
        w = float(known.mean())
        tau2 = max(0.0, sd**2 - w / attempts)
        room = n * delta**2 / z**2 - tau2  # what W / k' may be at most
        if room > 0 and w > 0:
            plan["more_attempts_per_task"] = max(0, int(np.ceil(w / room - attempts)))
    return plan
