"""Search across trials: one million steps, how long does a rare word take?

    .venv/bin/python bench/search_bench.py                       # SQLite, 1,000 trials x 1,000 steps
    .venv/bin/python bench/search_bench.py --postgres wt24b_sb   # PostgreSQL: a database of that name (dropped
                                                                 # after) on the server DATABASE_URL names
    .venv/bin/python bench/search_bench.py --trials 100          # a shorter run (100,000 steps)
    .venv/bin/python bench/search_bench.py --quick               # a smoke run of seconds (20 trials x 50 steps)

Builds the rows directly (no import: that is bench/import_bench.py's subject): jobs,
configurations, tasks, trials, one trajectory each whose step bodies are stored as the
import stores them (one blob of step JSON per trajectory), steps, their search text and
the word index (FTS5 on SQLite, StepWords on PostgreSQL), all by bulk insert. Each step's
message is a dozen words of a 20,000-word vocabulary (a few common ones in every step);
a rare word sits in --rare steps spread over the trials.

Then times, in turns, N times each: the search itself (`search_hits.search_trials`: the
index query, a page of hits with their trial, job, task and configuration, snippets read
from the stored bodies, permalinks), the same with a job filter and with a tool filter,
and the whole API request through django.test.Client (logged in); a common word's first
page too. Target: median under 300 ms for a rare word, on both databases.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import orjson
from database import postgres_url, psql, setup_django  # bench/: this folder is on sys.path when run as a script
from timing import p95

RARE = "quokkasaurus"
COMMON = ("the", "file", "error", "run")
TARGET_MS = 300.0


def build(trials: int, steps: int, rare: int, seed: int = 0) -> dict[str, float]:
    """The rows of `trials` trials of `steps` steps each, and their index; seconds per phase."""
    from django.db import connection, transaction

    from trials import search
    from trials.imports.blobs import StepBodies
    from trials.ingest.signatures import step_signature
    from trials.models import Configuration, Dataset, Job, Step, StepText, StepWords, Task, ToolCall, Trajectory, Trial
    from trials.storage.bulk_insert import insert_rows

    rng = random.Random(seed)
    vocabulary = [f"{rng.choice('bcdfghklmnprstvz')}{rng.choice('aeiou')}{n:x}word" for n in range(20_000)]
    total = trials * steps
    rare_at = set(rng.sample(range(total), rare))
    took: dict[str, float] = {}

    started = time.perf_counter()
    dataset = Dataset.objects.create(name="bench/search", version="1")
    jobs = Job.objects.bulk_create(
        [Job(key=f"job-{i}", name=f"search-bench-job-{i}", source_format="harbor") for i in range(10)]
    )
    configurations = Configuration.objects.bulk_create(
        [Configuration(key=f"bench-config-{i}", role=["baseline", "candidate", ""][i]) for i in range(3)]
    )
    tasks = Task.objects.bulk_create(
        [Task(dataset=dataset, name=f"bench-task-{i:03d}", checksum=f"c{i}") for i in range(trials // 4 + 1)]
    )
    trial_rows = Trial.objects.bulk_create(
        [
            Trial(
                key=f"trial-{i}",
                name=f"bench-task-{i // 4:03d}__{i}",
                source_format="harbor",
                job=jobs[i % len(jobs)],
                configuration=configurations[i % len(configurations)],
                task=tasks[i // 4],
                dataset=dataset,
                status="failed" if i % 3 == 0 else "passed",
                reward=0.0 if i % 3 == 0 else 1.0,
                step_count=steps,
                step_text_indexed=True,
            )
            for i in range(trials)
        ],
        batch_size=500,
    )
    took["catalog and trials"] = time.perf_counter() - started

    started = time.perf_counter()
    spool = Path(os.environ["DATA_DIR"]) / "spool"
    for t_number, trial in enumerate(trial_rows):
        bodies = StepBodies(spool)
        step_rows, text_rows, word_rows, call_rows, places, signed = [], [], [], [], [], []
        chain = ""
        for index in range(steps):
            n = t_number * steps + index
            words = [*rng.sample(COMMON, 2), *rng.choices(vocabulary, k=10)]
            if n in rare_at:
                words.insert(rng.randrange(len(words)), RARE)
            message = " ".join(words)
            tool = "bash" if index % 2 else "python"
            body = orjson.dumps(
                {
                    "step_id": index + 1,
                    "source": "agent",
                    "message": message,
                    "tool_calls": [{"tool_call_id": f"c{index}", "function_name": tool, "arguments": {"cmd": "ls"}}],
                }
            )
            places.append((bodies.add(body), len(body)))
            text = search.search_text(Trajectory(path="trajectory.json").read_step(orjson.loads(body), index))
            text_rows.append(text)
            word_rows.append(search.words_vector(text) if connection.vendor == "postgresql" else "")
            call_rows.append(tool)
            step_rows.append(index)
            signed.append(step_signature("agent", message, [(tool, {"cmd": "ls"})], [], chain))  # as the import signs
            chain = signed[-1].chain
        with transaction.atomic():
            trajectory = Trajectory.objects.create(
                trial=trial, path="agent/trajectory.json", role="main", step_count=steps, step_bodies_id=bodies.store()
            )
            first = (Step.objects.order_by("-pk").values_list("pk", flat=True).first() or 0) + 1
            pks = range(first, first + steps)
            insert_rows(
                Step,
                [
                    {
                        "id": pk,
                        "trajectory_id": trajectory.pk,
                        "trial_id": trial.pk,
                        "index": index,
                        "step_id": str(index + 1),
                        "source": "agent",
                        "model_name": "",
                        "message_text": "",  # (the page reads bodies; the search reads StepText)
                        "reasoning": "",
                        "is_copied_context": False,
                        "context_management": "",
                        "tool_call_count": 1,
                        "body_offset": offset,
                        "size": size,
                        "align_key": signature.align_key,
                        "signature": signature.signature,
                        "chain": signature.chain,
                    }
                    for pk, index, (offset, size), signature in zip(pks, step_rows, places, signed, strict=True)
                ],
            )
            insert_rows(
                ToolCall,
                [
                    {"step_id": pk, "trial_id": trial.pk, "tool_call_id": f"c{i}", "function_name": tool}
                    for i, (pk, tool) in enumerate(zip(pks, call_rows, strict=True))
                ],
            )
            insert_rows(
                StepText,
                [{"step_id": pk, "trial_id": trial.pk, "text": text} for pk, text in zip(pks, text_rows, strict=True)],
            )
            if connection.vendor == "postgresql":
                insert_rows(
                    StepWords,
                    [
                        {"step_id": pk, "trial_id": trial.pk, "words": words}
                        for pk, words in zip(pks, word_rows, strict=True)
                    ],
                )
        if (t_number + 1) % 100 == 0:
            print(f"  {t_number + 1:,} trials, {(t_number + 1) * steps:,} steps", flush=True)
    took["steps, bodies, tool calls, search text (and words)"] = time.perf_counter() - started

    started = time.perf_counter()
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":  # what index_pending adds, all at once
            cursor.execute("INSERT INTO trials_step_fts(rowid, text) SELECT step_id, text FROM trials_steptext")
            cursor.execute("INSERT INTO trials_step_fts(trials_step_fts) VALUES ('optimize')")
        cursor.execute("ANALYZE")
    phase = "word index (FTS5) and ANALYZE" if connection.vendor == "sqlite" else "ANALYZE"
    took[phase] = time.perf_counter() - started
    return took


def time_searches(repeat: int) -> dict[str, list[float]]:
    from django.contrib.auth import get_user_model
    from django.http import QueryDict
    from django.test import Client

    from trials.models import Job
    from trials.reading import search_hits

    job = Job.objects.order_by("pk").first()
    assert job is not None
    cases = {
        f"rare word ({RARE})": QueryDict(f"q={RARE}"),
        "rare word, ?job= (part of a name)": QueryDict(f"q={RARE}&job={job.name[-5:]}"),
        "rare word, ?tool=bash": QueryDict(f"q={RARE}&tool=bash"),
        "rare word's prefix (quokka)": QueryDict("q=quokka"),
        "common word, first page (error)": QueryDict("q=error"),
    }
    user, _ = get_user_model().objects.get_or_create(username="bench")
    client = Client()
    client.force_login(user)
    api_url = f"/api/search/?q={RARE}"
    found = search_hits.search_trials(cases[f"rare word ({RARE})"])
    assert found.hits and all(RARE in hit["snippet"] for hit in found.hits), "the rare word is not found"
    assert client.get(api_url).status_code == 200
    times: dict[str, list[float]] = {name: [] for name in [*cases, "API request, rare word"]}
    for _ in range(repeat):
        for name, params in cases.items():
            started = time.perf_counter()
            search_hits.search_trials(params)
            times[name].append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        response = client.get(api_url)
        times["API request, rare word"].append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200
    print(f"hits for the rare word: {len(found.hits)}", flush=True)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=1000, help="steps per trial")
    parser.add_argument("--rare", type=int, default=12, help="steps holding the rare word")
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument(
        "--postgres",
        metavar="DATABASE",
        help="run on PostgreSQL in this (new, dropped) database, on DATABASE_URL's server",
    )
    parser.add_argument(
        "--keep", metavar="DIR", help="build in DIR (and the database) and keep them; built already: time only"
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run of seconds: 20 trials x 50 steps, 3 rounds")
    args = parser.parse_args()
    if args.quick:
        args.trials, args.steps, args.rare, args.repeat = 20, 50, 3, 3
    database_url = postgres_url(args.postgres) if args.postgres else None

    with tempfile.TemporaryDirectory(prefix="search-bench-") as temporary:
        data_dir = args.keep or temporary
        built = bool(args.keep) and (Path(args.keep) / "built").exists()
        if args.postgres and not built:
            psql(database_url, f"DROP DATABASE IF EXISTS {args.postgres}")
            psql(database_url, f"CREATE DATABASE {args.postgres}")
        try:
            setup_django(data_dir, database_url)
            from django.db import connection

            print(f"{connection.vendor}: {args.trials:,} trials x {args.steps:,} steps", flush=True)
            for phase, seconds in ({} if built else build(args.trials, args.steps, args.rare)).items():
                print(f"built {phase}: {seconds:.1f} s", flush=True)
            if args.keep:
                (Path(args.keep) / "built").touch()
            times = time_searches(args.repeat)
            print(f"\n| {connection.vendor}, {args.trials * args.steps:,} steps | median ms | p95 ms |")
            print("|---|---:|---:|")
            for name, values in times.items():
                print(f"| {name} | {statistics.median(values):.1f} | {p95(values):.1f} |")
            rare = statistics.median(times[f"rare word ({RARE})"])
            print(f"\nrare word median {rare:.1f} ms: {'met' if rare < TARGET_MS else 'MISSED'} (< {TARGET_MS:.0f} ms)")
        finally:
            if args.postgres and not args.keep:
                from django.db import connections

                connections.close_all()
                psql(database_url, f"DROP DATABASE IF EXISTS {args.postgres}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
