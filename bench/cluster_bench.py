"""Benchmark of failure clusters: 10,000 failed trials signed and clustered.

Usage: .venv/bin/python bench/cluster_bench.py [--trials 10000] [--runs 10] [--database-url postgres://...]

Trials are written with bulk_create into a temporary SQLite database (or the PostgreSQL
database given, which it empties first): eight causes (four exception types, numbers, paths
and ids varying in each message), a failing tool on a fifth of them and a side effect after
a denied permission on one in fifty. Then it times:
  - signing them all (`signatures.sign_trials`, what an import does for its trials, and the
    backfill): signatures, safety flags, cluster rows, Trial.cluster;
  - clustering them: the list of clusters (one GROUP BY over Trial.cluster) with the first
    page's details, as the API builds it, and the API answer itself; filtered by configuration;
  - one cluster's page.
The target: 10,000 failed trials clustered in under 2 s.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from database import setup_django  # bench/: this folder is on sys.path when run as a script
from timing import describe, timed

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CAUSES = [
    ("FileNotFoundError", "No such file or directory: '/tmp/run-{n}/out-{m}.txt'"),
    ("FileNotFoundError", "No such file or directory: '/workspace/{n}/tests/test_{m}.py'"),
    ("AgentTimeoutError", "Agent timed out after {n}.{m} seconds"),
    ("AgentTimeoutError", "Agent execution timed out at 2026-11-{d}T10:{m}:00Z after {n} steps"),
    ("VerifierTimeoutError", "Verifier did not finish within {n} s (container {h})"),
    ("DockerBuildError", "docker build failed: exit code {m} for image sha256:{h}"),
    ("DockerBuildError", "Container {h} exited with code {m} while pulling layer {n}"),
    ("RewardFileNotFoundError", "reward.txt missing in /logs/verifier/{n}/ (session sess-{h})"),
]


def create_failed_trials(count: int, seed: int = 0) -> list[int]:
    from trials.models import Configuration, Dataset, Job, PermissionDecision, RuntimeEvent, Task, Trial

    rng = random.Random(seed)
    dataset = Dataset.objects.create(name="bench/failures", version="1")
    tasks = Task.objects.bulk_create(
        [Task(dataset=dataset, name=f"task-{i:04d}", checksum=f"{i:064x}") for i in range(500)]
    )
    confs = [Configuration.objects.create(key=f"{role}-bench", role=role) for role in ("baseline", "candidate")]
    jobs = [Job.objects.create(key=f"bench-{c.key}", name=f"{c.key}-job", source_format="harbor") for c in confs]
    rows = []
    for i in range(count):
        exception, template = CAUSES[rng.randrange(len(CAUSES))]
        side = i % 2
        message = template.format(
            n=rng.randint(1, 99999), m=rng.randint(0, 59), d=rng.randint(10, 28), h=f"{rng.getrandbits(48):012x}"
        )
        rows.append(
            Trial(
                key=f"bench:{i}",
                source_format="harbor",
                name=f"trial-{i:05d}",
                job=jobs[side],
                dataset=dataset,
                task=tasks[i % len(tasks)],
                configuration=confs[side],
                status="timeout" if "Timeout" in exception else "errored",
                exception_type=exception,
                exception_message=message,
            )
        )
    trials = Trial.objects.bulk_create(rows, batch_size=2_000)
    RuntimeEvent.objects.bulk_create(
        [
            RuntimeEvent(trial=t, type="tool.failed", sequence=5, payload={"toolName": rng.choice(["bash", "edit"])})
            for t in trials[::5]
        ],
        batch_size=2_000,
    )
    PermissionDecision.objects.bulk_create(
        [
            PermissionDecision(trial=t, action_id=f"a-{t.pk}", decision="deny", side_effect_after_denial=True)
            for t in trials[::50]
        ]
    )
    return [t.pk for t in trials]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--database-url", help="a PostgreSQL database to use (it is emptied first)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 200 trials, 2 runs")
    args = parser.parse_args()
    if args.quick:
        args.trials, args.runs = 200, 2

    with tempfile.TemporaryDirectory(prefix="cluster-bench-") as data_dir:
        setup_django(data_dir, args.database_url)
        if args.database_url:
            from django.core.management import call_command

            call_command("flush", interactive=False, verbosity=0)
        from django.contrib.auth import get_user_model
        from django.db import connection
        from django.test import Client

        from trials.models import Trial
        from trials.models.qc import FailureCluster
        from trials.triage import clusters, signatures

        start = time.perf_counter()
        ids = create_failed_trials(args.trials)
        print(f"{connection.vendor}: created {len(ids):,} failed trials in {time.perf_counter() - start:.1f} s")

        sign_first = timed(lambda: signatures.sign_trials(ids), 1)
        print(describe("sign all (first time: makes the clusters)", sign_first))
        sign_again = timed(lambda: signatures.sign_trials(ids), 3)
        print(describe("sign all again (clusters exist)", sign_again))
        clustered = Trial.objects.filter(cluster__isnull=False).count()
        print(f"{clustered:,} trials in {FailureCluster.objects.count()} clusters")

        def cluster_list(params=None):
            page = list(clusters.cluster_rows(params)[:50])
            return clusters.with_details(page, params)

        listing = timed(cluster_list, args.runs)
        print(describe("cluster them: GROUP BY + first page's details", listing))
        conf = Trial.objects.values_list("configuration__key", flat=True).first()
        filtered = timed(lambda: cluster_list({"configuration": conf}), args.runs)
        print(describe("the same for one configuration", filtered))

        user = get_user_model().objects.create_superuser("bench", password="bench-pw-1")
        client = Client()
        client.force_login(user)
        assert client.get("/api/qc/clusters/").status_code == 200
        api = timed(lambda: client.get("/api/qc/clusters/"), args.runs)
        print(describe("GET /api/qc/clusters/", api))
        biggest = clusters.cluster_rows().first()["cluster_id"]
        page = timed(lambda: client.get(f"/qc/clusters/{biggest}/"), args.runs)
        print(describe("GET /qc/clusters/<biggest>/", page))
        total = statistics.median(sign_first) + statistics.median(listing)
        verdict = "met" if total < 2000 else "MISSED"
        print(f"signed and clustered from scratch: {total:.0f} ms (target under 2,000 ms: {verdict})")


if __name__ == "__main__":
    main()
