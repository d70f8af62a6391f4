"""Timing helpers shared by the bench scripts."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path


def peak_rss_kb() -> int:
    """This process's own peak RSS: VmHWM starts again at exec (ru_maxrss would keep the parent's, and a
    bench's parent holds what it wrote for the child to import)."""
    status = Path("/proc/self/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")))


def measure(client, urls: dict[str, str], repeat: int) -> dict[str, list[float]]:
    """Milliseconds of each URL, taken in turns so that load from other processes hits all alike."""
    for url in urls.values():  # warm-up, and a check that every page answers
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
    times: dict[str, list[float]] = {name: [] for name in urls}
    for _ in range(repeat):
        for name, url in urls.items():
            started = time.perf_counter()
            response = client.get(url)
            times[name].append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200
    return times


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def timed(fn: Callable[[], object], runs: int) -> list[float]:
    """Milliseconds of each of `runs` calls of `fn`."""
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        out.append((time.perf_counter() - started) * 1000)
    return out


def describe(name: str, ms: list[float]) -> str:
    return f"{name:<52} median {statistics.median(ms):8.1f} ms   p95 {p95(ms):8.1f} ms   (n={len(ms)})"
