"""Can hashing a job's files hide behind parsing them, on this machine? Pure Python, no database.

    .venv/bin/python bench/overlap_bench.py          # the job of large observations of import_bench.py; --quick

An import hashes every file (sha256) and parses its JSON (orjson, then the checks). hashlib
and file reads let go of the GIL, so a second thread or process could hash while the main
thread parses. This times sha256 of the job's files alone, then in a thread while the main
thread parses the same files over and over, then in the main process while another process
does. Medians of 5.
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def hash_all(files: list[Path]) -> float:
    start = time.perf_counter()
    for path in files:
        with open(path, "rb") as f:
            hashlib.sha256(f.read())
    return time.perf_counter() - start


def parse_all(files: list[Path]) -> float:
    start = time.perf_counter()
    for path in files:
        if path.suffix == ".json":
            orjson.loads(path.read_bytes())
    return time.perf_counter() - start


def parse_until(files: list[Path], stop) -> None:
    while not stop.is_set():
        parse_all(files)


def median_of(work, rounds: int = 5) -> float:
    return statistics.median(work() for _ in range(rounds))


def hashed_in_a_thread(files: list[Path]) -> float:
    """sha256 on a thread of its own while this thread parses."""
    took: list[float] = []
    thread = threading.Thread(target=lambda: took.append(hash_all(files)))
    thread.start()
    while thread.is_alive():
        parse_all(files)
    return took[0]


def main() -> None:
    from trials.demo import write_job

    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2 trials instead of 20")
    tasks = 2 if parser.parse_args().quick else 20

    with tempfile.TemporaryDirectory(prefix="bench-overlap-") as tmp:
        job = write_job(Path(tmp), "big-obs", role="baseline", configuration_id="bench", agent="bench-agent",
                        model="bench-model", tasks=tasks, attempts=1, steps_per_trial=20, observation_bytes=100_000,
                        with_extras=False)  # fmt: skip
        files = sorted(p for p in job.rglob("*") if p.is_file())
        megabytes = sum(p.stat().st_size for p in files) / 1e6
        hash_all(files), parse_all(files)  # (into the page cache)
        parse_s = median_of(lambda: parse_all(files))
        alone_s = median_of(lambda: hash_all(files))
        thread_s = median_of(lambda: hashed_in_a_thread(files))
        stop = multiprocessing.Event()
        other = multiprocessing.Process(target=parse_until, args=(files, stop))
        other.start()
        time.sleep(0.2)
        process_s = median_of(lambda: hash_all(files))
        stop.set()
        other.join()
    print(f"{len(files)} files, {megabytes:.1f} MB")
    print(f"orjson's parse of the .json files:              {parse_s * 1000:6.1f} ms")
    print(f"sha256 of every file, alone:                    {alone_s * 1000:6.1f} ms")
    print(f"sha256 on a thread while this thread parses:    {thread_s * 1000:6.1f} ms")
    print(f"sha256 while another process parses:            {process_s * 1000:6.1f} ms")


if __name__ == "__main__":
    main()
