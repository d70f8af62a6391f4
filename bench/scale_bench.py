"""Scale: 10,000 trials (two 5,000-trial jobs) on PostgreSQL + Redis + Celery workers, then the pages.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres REDIS_URL=redis://127.0.0.1:6379/14 \
        .venv/bin/python bench/scale_bench.py              # --trials 10000 --repeat 30
    .venv/bin/python bench/scale_bench.py --trials 1000    # a shorter run; --quick: a smoke run

Steps:
  1. create a throw-away PostgreSQL database (dropped at the end) on DATABASE_URL's server,
     flush the Redis db REDIS_URL names;
  2. generate two Harbor jobs with trials.demo.write_job (baseline and candidate
     configuration, the same tasks and checksums), each half of --trials, and split each
     into job folders of --chunk trials (same job files, so one Job row per job), so the
     queue holds many imports that several workers can share;
  3. import the first --one-worker-trials with one worker, then the rest with two
     (`celery worker --pool=prefork --concurrency=1` each): trials/s for each;
  4. time the pages through django.test.Client (logged in), N requests each, taken in
     turns so load from other processes hits all alike; the comparison is computed once
     by a worker (reported apart) and then served from its cache.

Environment used (set before Django starts): DATABASE_URL, REDIS_URL, DATA_DIR, and a
queue name of our own, so the workers take only this script's tasks.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

from database import postgres_url, psql  # bench/: this folder is on sys.path when run as a script
from timing import measure, p95

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

QUEUE = "scale-bench"
PAGE_TARGET_MEDIAN_MS, PAGE_TARGET_P95_MS = 150.0, 500.0


def configure(database_url: str, redis_url: str, data_dir: Path) -> None:
    """Environment for this process and the workers: it must be set before django.setup()."""
    os.environ.update(
        {
            "DATABASE_URL": database_url,
            "REDIS_URL": redis_url,
            "DATA_DIR": str(data_dir),
            "CELERY_TASK_DEFAULT_QUEUE": QUEUE,
            "DJANGO_SETTINGS_MODULE": "benchviewer.settings",
        }
    )


def generate(out: Path, total_trials: int, attempts: int, steps: int, chunk: int) -> dict[str, list[Path]]:
    """Two jobs of total/2 trials each, each split into job folders of `chunk` trials."""
    from trials.demo import write_job

    tasks = max(1, total_trials // (2 * attempts))
    chunks: dict[str, list[Path]] = {}
    for role, bias in (("baseline", 0.0), ("candidate", 0.05)):
        started = time.perf_counter()
        # Plain Harbor trials name their configuration agent__model: one agent name per side.
        job = write_job(out / "whole", f"scale-{role}", role=role, configuration_id=f"scale-{role}",
                        agent=f"scale-agent-{role}", model="openai/gpt-5.4", tasks=tasks, attempts=attempts,
                        steps_per_trial=steps, success_bias=bias, with_extras=False)  # fmt: skip
        trial_dirs = sorted(p for p in job.iterdir() if p.is_dir())
        job_files = [p for p in job.iterdir() if p.is_file()]
        chunks[role] = []
        for i in range(0, len(trial_dirs), chunk):
            # Same config.json / result.json as the whole job: every chunk maps to one Job row.
            folder = out / role / f"chunk-{i // chunk:03d}" / f"scale-{role}"
            folder.mkdir(parents=True)
            for f in job_files:
                shutil.copy2(f, folder / f.name)
            for d in trial_dirs[i : i + chunk]:
                d.rename(folder / d.name)
            chunks[role].append(folder)
        shutil.rmtree(job)
        took = time.perf_counter() - started
        print(f"generated {role}: {len(trial_dirs):,} trials in {len(chunks[role])} chunks, {took:.0f} s", flush=True)
    return chunks


class Workers:
    """`celery worker` subprocesses with this process's environment; stopped by their own ids."""

    def __init__(self, count: int, log_dir: Path, tag: str):
        self.procs: list[subprocess.Popen] = []
        self.logs: list[Path] = []
        for i in range(count):
            log = log_dir / f"worker-{tag}-{i}.log"
            self.logs.append(log)
            cmd = [str(REPO / ".venv" / "bin" / "celery"), "-A", "benchviewer", "worker", "--pool=prefork",
                   "--concurrency=1", "--prefetch-multiplier=1", "-Q", QUEUE, "-n", f"scale-{tag}-{i}@%h",
                   "--without-gossip", "--without-mingle", "-l", "info"]  # fmt: skip
            # A session of its own: stopping it stops its pool child too, and nothing else.
            with open(log, "wb") as out:
                proc = subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            self.procs.append(proc)
        deadline = time.monotonic() + 60
        while not all(" ready." in log.read_text(errors="replace") for log in self.logs):
            if time.monotonic() > deadline or any(p.poll() is not None for p in self.procs):
                self.stop()
                raise RuntimeError(f"workers did not start; see {log_dir}")
            time.sleep(0.2)

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)  # warm shutdown
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def import_with_workers(folders: list[Path], workers: int, log_dir: Path, tag: str) -> dict:
    """Queue one import per folder, let `workers` workers run them, and time it end to end."""
    from trials.models import Import, Trial
    from trials.queue import create_import  # (after django.setup(): it loads models)
    from trials.tasks import import_pack_task

    pool = Workers(workers, log_dir, tag)
    try:
        before = Trial.objects.count()
        started = time.perf_counter()
        ids = []
        for folder in folders:
            imp = create_import(origin=Import.Origin.CLI, source_name=folder.name, source_path=str(folder))
            import_pack_task.delay(str(imp.pk))
            ids.append(imp.pk)
        finished = (Import.Status.DONE, Import.Status.FAILED)
        while Import.objects.filter(pk__in=ids).exclude(status__in=finished).exists():
            time.sleep(0.25)
        seconds = time.perf_counter() - started
    finally:
        pool.stop()
    failed = list(Import.objects.filter(pk__in=ids, status=Import.Status.FAILED).values_list("problems", flat=True))
    assert not failed, failed[:1]
    trials = Trial.objects.count() - before
    print(f"imported {trials:,} trials with {workers} worker(s) in {seconds:.1f} s: {trials / seconds:.1f} trials/s",
          flush=True)  # fmt: skip
    return {"workers": workers, "trials": trials, "imports": len(ids), "seconds": seconds, "rate": trials / seconds}


def comparison_compute(client, url: str, log_dir: Path) -> dict:
    """First request queues the computation; a worker runs it; we wait until it is cached."""
    from comparisons.models import Comparison

    pool = Workers(1, log_dir, "compare")
    try:
        started = time.perf_counter()
        assert client.get(url).status_code == 200
        while not Comparison.objects.filter(status__in=(Comparison.Status.DONE, Comparison.Status.FAILED)).exists():
            time.sleep(0.1)
        wall = time.perf_counter() - started
    finally:
        pool.stop()
    row = Comparison.objects.get()
    assert row.status == Comparison.Status.DONE, row.error
    return {"compute_ms": row.compute_ms, "wall_s": wall}


def page_urls() -> dict[str, str]:
    from trials.models import Configuration, Job, Trial

    base = Configuration.objects.get(agent_name="scale-agent-baseline")
    cand = Configuration.objects.get(agent_name="scale-agent-candidate")
    job = Job.objects.get(name="scale-baseline")
    dataset = Trial.objects.filter(job=job).select_related("dataset").first().dataset  # (the job's own)
    # A task in the middle of the alphabet, and a trial in the middle of the table.
    tasks = sorted(set(Trial.objects.values_list("task__name", flat=True)))
    task = tasks[len(tasks) // 2]
    trials = Trial.objects.order_by("pk")
    trial = trials.select_related("configuration")[trials.count() // 2]
    # The trial page as a list links it: previous / next within the list it was opened from.
    from_list = urlencode({"list": urlencode({"configuration": trial.configuration.key})})
    return {
        "jobs list": "/jobs/",
        "job page": f"/jobs/{job.pk}/",
        "trials ?dataset=": "/trials/?" + urlencode({"dataset": f"{dataset.name}@{dataset.version}"}),
        "trials ?configuration=&status=failed": "/trials/?"
        + urlencode({"configuration": cand.key, "status": "failed"}),
        "trials ?task=&reward_min=0.5": "/trials/?" + urlencode({"task": task, "reward_min": 0.5}),
        "trial page": f"/trials/{trial.pk}/",
        "trial page from its configuration's list": f"/trials/{trial.pk}/?{from_list}",
        "comparison (cached)": f"/comparisons/?baseline={base.pk}&candidate={cand.pk}",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=10_000, help="total, split between the two jobs")
    parser.add_argument("--attempts", type=int, default=5)
    parser.add_argument("--steps", type=int, default=4, help="steps per trial")
    parser.add_argument("--chunk", type=int, default=250, help="trials per import (one Celery task each)")
    parser.add_argument("--one-worker-trials", type=int, default=2_500, help="imported with one worker")
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--database", default="benchviewer_scale", help="made and dropped on DATABASE_URL's server")
    parser.add_argument("--redis-url", default=os.environ.get("REDIS_URL"), help="a Redis db of its own (REDIS_URL)")
    parser.add_argument("--keep-database", action="store_true", help="leave the database for a closer look")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 40 trials in 4 imports, 3 requests")
    args = parser.parse_args()
    if args.quick:
        args.trials, args.attempts, args.chunk, args.one_worker_trials, args.repeat = 40, 2, 10, 20, 3
    if not args.redis_url:
        raise SystemExit("set REDIS_URL (or --redis-url) to a Redis db this bench may empty")
    database_url = postgres_url(args.database)

    import redis

    overall = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="scale-bench-") as tmp:
        tmp_path = Path(tmp)
        configure(database_url, args.redis_url, tmp_path / "data")
        psql(database_url, f"DROP DATABASE IF EXISTS {args.database}")
        psql(database_url, f"CREATE DATABASE {args.database}")
        broker = redis.Redis.from_url(args.redis_url)
        broker.flushdb()  # (the db is this bench's own)
        try:
            return run(args, tmp_path, overall)
        finally:
            from django.db import connections

            connections.close_all()
            broker.flushdb()
            if args.keep_database:
                print(f"kept database {args.database}: drop it with psql -c 'DROP DATABASE {args.database}'")
            else:
                psql(database_url, f"DROP DATABASE IF EXISTS {args.database}")


def run(args: argparse.Namespace, tmp: Path, overall: float) -> int:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    call_command("migrate", verbosity=0)
    chunks = generate(tmp / "packs", args.trials, args.attempts, args.steps, args.chunk)
    # One worker takes the first chunks, two workers the rest (the larger part: the whole
    # import with one worker alone would take twice as long as it needs to).
    folders = chunks["baseline"] + chunks["candidate"]
    first = max(1, min(len(folders) - 1, round(args.one_worker_trials / args.chunk)))
    one = import_with_workers(folders[:first], 1, tmp, "one")
    two = import_with_workers(folders[first:], 2, tmp, "two")
    # What autovacuum does shortly after an import this size (PostgreSQL 13+ vacuums tables that
    # only grew, too): fresh planner statistics (without them it guesses 30 rows for a
    # 10,000-trial filter and picks bad plans), and a visibility map, which lets a count be
    # answered from an index alone.
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")

    client = Client()
    client.force_login(get_user_model().objects.create_superuser("bench", password="bench-password-1"))
    urls = page_urls()
    compute = comparison_compute(client, urls["comparison (cached)"], tmp)
    times = measure(client, urls, args.repeat)

    print()
    print(f"import: 1 worker {one['rate']:.1f} trials/s ({one['trials']:,} trials, {one['imports']} imports, "
          f"{one['seconds']:.1f} s); 2 workers {two['rate']:.1f} trials/s ({two['trials']:,} trials, "
          f"{two['imports']} imports, {two['seconds']:.1f} s); x{two['rate'] / one['rate']:.2f}")  # fmt: skip
    print(f"comparison computed by a worker: {compute['compute_ms']:.0f} ms "
          f"(first request to cached: {compute['wall_s']:.1f} s)")  # fmt: skip
    print(f"\nN={args.repeat} requests each, django.test.Client, milliseconds")
    print(f"{'page':44} {'median':>8} {'p95':>8}")
    met = True
    for name, ms in times.items():
        median, high = statistics.median(ms), p95(ms)
        ok = median < PAGE_TARGET_MEDIAN_MS and high < PAGE_TARGET_P95_MS
        met &= ok
        print(f"{name:44} {median:8.1f} {high:8.1f} {'' if ok else '  MISSED'}")
    print(f"\ntargets (median < {PAGE_TARGET_MEDIAN_MS:.0f} ms, p95 < {PAGE_TARGET_P95_MS:.0f} ms): "
          f"{'met' if met else 'missed'}; import x{two['rate'] / one['rate']:.2f} with the second worker")  # fmt: skip
    print(f"total bench time {time.perf_counter() - overall:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
