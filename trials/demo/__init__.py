"""Deterministic generator of realistic Harbor trial packs, for the demo and for benchmarks.

Everything here is produced by code from a seed: no reference file is copied. The same
arguments always give byte-identical files (no clock, no absolute output paths, no
process-dependent hashing), so tests can compare trees and benchmarks can be repeated.

Layout written by `write_job` (one Harbor job directory):

    <job>/config.json, result.json, lock.json, job.log
    <job>/<task[:32]>__<7 chars>/
        config.json, result.json, lock.json, trial.log, exception.txt (errored only),
        benchmark-trial-pack.json,
        agent/trajectory.json, agent/runtime-events.jsonl, agent/context-events.jsonl,
        verifier/reward.json | reward.txt, reward-details.json, test-stdout.txt, ctrf.json,
        artifacts/manifest.json + the artifact files at their destinations.

Pure Python (stdlib + orjson); no Django imports, so scripts can use it directly.

Modules, from the job down (each imports only those after it): job, trial, then the
files a trial holds (lime, agentcontext, verifier, atif, texts), then plans, tasks and
common.
"""

from trials.demo.agentcontext import SECRET
from trials.demo.atif import write_trajectory
from trials.demo.job import write_demo, write_job

__all__ = ["SECRET", "write_demo", "write_job", "write_trajectory"]
