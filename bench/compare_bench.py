"""Benchmark of the comparison: 2 configurations x 1,000 tasks x 5 attempts (10,000 trials),
and of the N-sides grid: 12 configurations x 1,000 tasks x 5 attempts (60,000 trials).

Usage: .venv/bin/python bench/compare_bench.py [--tasks 1000] [--attempts 5] [--sides 12] [--runs 30]
       .venv/bin/python bench/compare_bench.py --quick   (a few seconds: 4 sides x 50 tasks x 3 attempts)

Each side has about 2% unscored (errored) trials, 3% timed out (some with a reward) and 2%
infrastructure failures (failure_class set as the import's signing would).

Trials are written with bulk_create straight into a temporary SQLite database (not through
the importer: this measures the comparison, not the import). Then it times:
  - the comparison computed from scratch (load rows, statistics, 10,000 bootstrap resamples);
  - the same through the Celery task path (eager) including the cache write;
  - the comparison page served from the cache (django.test.Client, logged in), N runs;
  - the JSON API and one chart endpoint from the cache;
  - the grid of every side against the first computed (target <= 3 s), then its page, API
    and chart from the stored grid (target <= 100 ms).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

from database import setup_django  # bench/: this folder is on sys.path when run as a script
from timing import describe, timed

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def create_trials(tasks: int, attempts: int, sides: int = 2, seed: int = 0) -> list[int]:
    from trials.models import Configuration, Dataset, Job, Task, Trial

    rng = random.Random(seed)
    dataset = Dataset.objects.create(name="bench/terminal-tasks", version="2026.11")
    task_rows = Task.objects.bulk_create(
        [Task(dataset=dataset, name=f"task-{i:04d}", checksum=f"{i:064x}") for i in range(tasks)]
    )
    ids = []
    roles = [("baseline", 0.0), ("candidate", 0.04)] + [(f"control{i}", 0.01 * i) for i in range(sides - 2)]
    for role, bias in roles:
        conf = Configuration.objects.create(
            key=f"{role}-bench",
            role=role if role in ("baseline", "candidate") else "control",
            agent_name="terminus-2",
            agent_version="1.0",
            model_name="gpt-5.4",
        )
        job = Job.objects.create(key=f"bench-{role}", name=f"{role}-job", source_format="harbor")
        trials = []
        for task in task_rows:
            difficulty = rng.random()
            for attempt in range(1, attempts + 1):
                roll = rng.random()
                status = "errored" if roll < 0.02 else "timeout" if roll < 0.05 else None
                reward = None if status == "errored" else float(rng.random() < (1 - difficulty) + bias)
                status = status or ("passed" if reward == 1.0 else "failed")
                infra = 0.05 <= roll < 0.07  # a sandbox failure the verifier scored 0
                reward = 0.0 if infra else reward
                status = "failed" if infra else status
                tokens = rng.randint(5_000, 60_000)
                trials.append(
                    Trial(
                        key=f"{role}:{task.name}:{attempt}",
                        source_format="harbor",
                        name=f"{task.name}__{role[:1]}{attempt}",
                        job=job,
                        dataset=dataset,
                        task=task,
                        configuration=conf,
                        attempt=attempt,
                        status=status,
                        reward=reward,
                        rewards={} if reward is None else {"reward": reward, "efficiency": round(rng.random(), 3)},
                        duration_sec=rng.uniform(30, 600),
                        input_tokens=tokens,
                        output_tokens=tokens // 10,
                        cost_usd=tokens * 3e-6,
                        is_complete=rng.random() > 0.03,
                        failure_class="infrastructure" if infra else "",
                        documents={"evidence_pack": {"decisionInputs": {"p0QcGateRegressionCount": 0}}},
                    )
                )
        Trial.objects.bulk_create(trials, batch_size=2_000)
        ids.append(conf.pk)
    return ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=1_000)
    parser.add_argument("--attempts", type=int, default=5)
    parser.add_argument("--sides", type=int, default=12, help="configurations in the grid (the pair uses two)")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 4 sides x 50 tasks x 3 attempts")
    args = parser.parse_args()
    if args.quick:
        args.tasks, args.attempts, args.sides, args.runs = 50, 3, 4, 3
    print(f"load average (1, 5, 15 min): {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    with tempfile.TemporaryDirectory(prefix="compare-bench-") as data_dir:
        setup_django(data_dir)
        from django.contrib.auth import get_user_model
        from django.test import Client

        from comparisons import services
        from comparisons.computing import computation
        from comparisons.families import grid
        from comparisons.models import Comparison, GridResult
        from comparisons.statistics.sides import Side
        from trials.models import Trial

        start = time.perf_counter()
        conf_ids = create_trials(args.tasks, args.attempts, max(2, args.sides))
        base_id, cand_id = conf_ids[:2]
        total = len(conf_ids) * args.tasks * args.attempts
        print(f"created {total:,} trials in {time.perf_counter() - start:.1f} s (bulk_create)")
        base, cand = Side("configuration", base_id), Side("configuration", cand_id)

        compute = timed(lambda: computation.compute(base, cand), 5)
        print(describe("compute (10,000 bootstrap resamples)", compute))
        task_path = timed(lambda: (Comparison.objects.all().delete(), services.get_or_compute(base, cand)), 3)
        print(describe("compute via Celery task + cache write", task_path))

        user = get_user_model().objects.create_user("bench", password="bench-pw-1")
        client = Client()
        client.force_login(user)
        query = f"baseline={base_id}&candidate={cand_id}"
        assert client.get(f"/comparisons/?{query}").status_code == 200  # warm the cache
        page = timed(lambda: client.get(f"/comparisons/?{query}"), args.runs)
        print(describe("page from cache", page))
        api = timed(lambda: client.get(f"/api/comparisons/?{query}"), args.runs)
        print(describe("API JSON from cache", api))
        chart = timed(lambda: client.get(f"/api/comparisons/charts/cost_reward/?{query}"), 10)
        print(describe("chart cost_reward (10,000 points) from cache", chart))
        c = services.get_or_compute(base, cand).result["comparison"]
        ci = c["meanRewardDeltaCi95"]
        print(
            f"meanRewardDelta {c['meanRewardDelta']:+.4f}  CI95 [{ci[0]:+.4f}, {ci[1]:+.4f}]  decision {c['decision']}"
        )

        sides = [Side("configuration", pk) for pk in conf_ids]
        n_grid = f"{len(sides)} sides x {args.tasks:,} tasks"
        print(describe(f"grid computed ({n_grid})", timed(lambda: grid.compute_grid(sides, sides[0]), 3)))
        default = grid.default_reference("configuration", conf_ids)
        print(describe("default reference chosen", timed(lambda: grid.default_reference("configuration", conf_ids), 5)))
        stored = timed(lambda: (GridResult.objects.all().delete(), grid.get_or_compute_grid(sides, sides[0])), 3)
        print(describe("grid computed and stored (first request)", stored))
        grid_query = "sides=" + ",".join(map(str, conf_ids))
        assert client.get(f"/comparisons/grid/?{grid_query}").status_code == 200
        print(
            describe(
                "grid page from the stored grid",
                timed(lambda: client.get(f"/comparisons/grid/?{grid_query}"), args.runs),
            )
        )
        print(
            describe(
                "grid API (100 tasks) from the stored grid",
                timed(lambda: client.get(f"/api/comparisons/grid/?{grid_query}"), args.runs),
            )
        )
        print(
            describe(
                "grid chart from the stored grid",
                timed(lambda: client.get(f"/api/comparisons/grid/chart/?{grid_query}"), 10),
            )
        )
        dataset_id = Trial.objects.values_list("dataset_id", flat=True).first()
        print(
            describe(
                f"trend page ({len(sides)} points)",
                timed(lambda: client.get(f"/comparisons/trend/?dataset={dataset_id}"), 5),
            )
        )
        last = grid.get_or_compute_grid(sides, sides[0]).result["sides"][-1]
        print(
            f"last side: delta {last['delta_vs_reference']:+.4f} CI95 {last['delta_ci95']}"
            f"  Holm p {last['mcnemar_p_holm']}  MDE {last['mde']}  unscored {last['unscored']}"
            f"  infra {last['infra_failures']}  without infra {last['mean_reward_excluding_infra']:.4f}"
        )
        print(f"default reference: configuration {default} (of {conf_ids})")
        print(f"load average after (1, 5, 15 min): {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
