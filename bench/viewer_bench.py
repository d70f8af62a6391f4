"""Trial viewer speed: does the page cost the same for 50 and 50,000 steps?

Imports a 50-step and a 50,000-step trajectory into a throw-away SQLite database, then
times (server side, through django.test.Client) the trial page, a deep link to step
40,000 (step 40 for the short one: the same relative place), and a search, N times each.
Each is imported twice, the twin with other arguments in one tool call a tenth in (step 5
of 50, 5,000 of 50,000: the 50-step page's window is full too), as two attempts of one
task: the side-by-side page (opening at that divergence) and the align API are timed on the pair.

    .venv/bin/python bench/viewer_bench.py [--steps 50000] [--repeat 30]

Targets: every 50,000-step median within 1.5x of the 50-step one; trial page < 100 ms.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import orjson
from database import setup_django  # bench/: this folder is on sys.path when run as a script
from timing import measure, p95

REPO = Path(__file__).resolve().parents[1]


def import_trajectory(out: Path, steps: int, observation_bytes: int, twin: bool = False):
    # (imported once Django is set up: the models need it)
    from trials import search
    from trials.demo import write_trajectory
    from trials.imports.service import run_import
    from trials.models import Import, Trial
    from trials.queue import create_import  # (after django.setup(): they load models)

    session = f"bench-{steps}{'-twin' if twin else ''}"
    path = out / f"{session}.trajectory.json"
    write_trajectory(  # (the twin the same steps: the session id is written into them)
        path,
        steps=steps,
        observation_bytes=observation_bytes,
        seed=0,
        session_id=f"bench-{steps}",
        model="openai/gpt-5.4",
    )
    # A needle only one step near the end has: the worst case for a search (no early stop).
    data = orjson.loads(path.read_bytes())
    data["steps"][steps * 9 // 10]["message"] += "\nbench-needle-7f3a"
    data["session_id"] = session
    if twin:  # the first tool call from a tenth on gets other arguments: the first divergence
        step = next(s for s in data["steps"][steps // 10 :] if s.get("tool_calls"))
        step["tool_calls"][0]["arguments"] = {"bench": "other arguments"}
    path.write_bytes(orjson.dumps(data))
    started = time.perf_counter()
    imp = create_import(origin=Import.Origin.CLI, source_name=path.name, source_path=str(path))
    run_import(str(imp.pk))
    took = time.perf_counter() - started
    trial = Trial.objects.get(trajectories__session_id=session)
    started = time.perf_counter()
    search.index_pending()  # what the import's follow-up task does
    indexed = time.perf_counter() - started
    print(
        f"imported {steps:>6} steps ({path.stat().st_size / 1e6:.1f} MB) in {took:.1f} s, indexed in {indexed:.1f} s",
        flush=True,
    )
    trial.refresh_from_db()
    return trial


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--small", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--observation-bytes", type=int, default=400)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 50 and 200 steps, 1 round")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.repeat = 200, 1

    with tempfile.TemporaryDirectory(prefix="viewer-bench-") as tmp:
        setup_django(str(Path(tmp) / "data"))
        from django.contrib.auth import get_user_model
        from django.test import Client
        from django.urls import reverse

        client = Client()
        client.force_login(get_user_model().objects.create_user("bench", password="bench-password"))

        trials = {n: import_trajectory(Path(tmp), n, args.observation_bytes) for n in (args.small, args.steps)}
        twins = {
            n: import_trajectory(Path(tmp), n, args.observation_bytes, twin=True) for n in (args.small, args.steps)
        }
        from trials.models import Task, Trial

        for n in trials:  # two attempts of one task (a standalone trajectory names none)
            task = Task.objects.create(name=f"bench-task-{n}")
            Trial.objects.filter(pk__in=[trials[n].pk, twins[n].pk]).update(task=task)
        from django.db import connection

        if connection.vendor == "postgresql":  # statistics, as autovacuum gathers soon after an import
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")

        def cases(trial, n: int) -> dict[str, str]:
            page = reverse("trial-detail", args=[trial.pk])
            align = reverse("api-trial-align", args=[trial.pk, twins[n].pk])
            near = n * 9 // 10 - 10  # a window just before the divergence
            return {
                "side by side (at divergence)": reverse("trial-side-by-side", args=[trial.pk, twins[n].pk]),
                "align API, from step 1": align,
                "align API, at 9/10": f"{align}?left={near}&right={near}",
                "trial page": page,
                "deep link to step 4/5": reverse("trial-step", args=[trial.pk, n * 4 // 5]),  # 40,000 of 50,000
                "search, common word": page + "?q=read_file",
                "search, one match": page + "?q=bench-needle-7f3a",
                "search API, one match": reverse("api-trial-search", args=[trial.pk]) + "?q=bench-needle-7f3a",
                # The index finds neither, so the search scans the trial's steps (trials.reading.steps.search_steps).
                "search, no match (scan)": page + "?q=zz-nowhere-9q",
                "search, inside a word (scan)": page + "?q=ench-needle-7f3a",
            }

        results: dict[str, dict[int, list[float]]] = {}
        small_cases, large_cases = cases(trials[args.small], args.small), cases(trials[args.steps], args.steps)
        for name in small_cases:
            times = measure(client, {"short": small_cases[name], "long": large_cases[name]}, args.repeat)
            small_times, large_times = times["short"], times["long"]
            results[name] = {args.small: small_times, args.steps: large_times}

        small, large = args.small, args.steps
        print()
        print(f"N={args.repeat} requests each, server time via django.test.Client, milliseconds")
        print(f"{'':30} {f'{small} steps':>22} {f'{large} steps':>22} {'ratio':>7}")
        print(f"{'':30} {'median':>10} {'p95':>11} {'median':>10} {'p95':>11} {'(median)':>7}")
        worst = 0.0
        for name, by_n in results.items():
            a, b = by_n[small], by_n[large]
            ratio = statistics.median(b) / statistics.median(a)
            if not name.startswith("search"):
                worst = max(worst, ratio)
            print(
                f"{name:30} {statistics.median(a):10.1f} {p95(a):11.1f} "
                f"{statistics.median(b):10.1f} {p95(b):11.1f} {ratio:7.2f}"
            )
        page_median = statistics.median(results["trial page"][large])
        print()
        print(f"trial page median at {large} steps: {page_median:.1f} ms (target < 100 ms)")
        print(f"worst page / deep-link / side-by-side ratio: {worst:.2f} (target <= 1.5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
