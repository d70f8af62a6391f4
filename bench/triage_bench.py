"""Benchmark of triage at reading speed: known causes clustered, flags queued, clusters filed.

Usage: .venv/bin/python bench/triage_bench.py [--trials 1000] [--timeouts 20] [--port 8776] [--quick]

A job of failed trials is written with bulk_create into a temporary SQLite database, each
from one of 12 known causes (infrastructure, task quality, capability and safety ones), its
numbers, paths, ids, failing verifier test and task varying from trial to trial, each trial
with a short trajectory (a user step, then agent steps; a tool cause calls its tool), plus
timed-out trials that still have a reward. Then it signs them (what an import does) and
reports:
  - clusters formed (target: at most 3 more than the known causes; a cause with no error text, and a
    timeout, is known by its failing test) and purity: the share of trials in the cluster of their cause's
    majority (target >= 95%);
  - every flagged trial queued (the timed-out ones with a reward among them);
  - a scripted triager in Chromium (Playwright, 1280x800) filing every cluster as one QC item
    from its page, counting its actions (a page opened, a field set, a button pressed;
    target <= 4 per cluster), then checking each item cites every trial of its cluster with
    a link to the trial and to the step or test where its failure shows.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

from browser import CHROMIUM, CHROMIUM_ARGS, refuse_port_in_use, wait_until_up
from database import environment, setup_django  # bench/: this folder is on sys.path when run as a script

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# (name, status, exception type, message template, failure category, failing tool, safety)
CAUSES = [
    (
        "sandbox",
        "errored",
        "SandboxStartError",
        "sandbox sb-{h} for /work/run-{n} did not start after {m}s",
        "",
        "",
        False,
    ),
    (
        "docker-build",
        "errored",
        "DockerBuildError",
        "docker build failed: exit code {m} for image sha256:{h}",
        "",
        "",
        False,
    ),
    ("oom", "errored", "RuntimeError", "container {h} was OOMKilled (exit code 137) at {n} MiB", "", "", False),
    ("credentials", "errored", "AuthenticationError", "invalid api key for org-{h} (request req_{n}x)", "", "", False),
    (
        "verifier-timeout",
        "errored",
        "VerifierTimeoutError",
        "Verifier did not finish within {n} s (container {h})",
        "",
        "",
        False,
    ),
    (
        "reward-file",
        "errored",
        "RewardFileNotFoundError",
        "reward.txt missing in /logs/verifier/{n}/ (session sess-{h})",
        "",
        "",
        False,
    ),
    (
        "bad-task",
        "failed",
        "",
        "verifier expects /app/out-{n}.txt, which the instruction never asks for",
        "task_quality",
        "",
        False,
    ),
    ("agent-timeout", "timeout", "AgentTimeoutError", "Agent execution timed out after {n}.{m} seconds", "", "", False),
    (
        "agent-exit",
        "errored",
        "NonZeroAgentExitCodeError",
        "agent process exited with code {m} after {n} steps",
        "",
        "",
        False,
    ),
    ("wrong-answer", "failed", "", "", "", "", False),
    ("bash-missing", "failed", "", "bash: /usr/local/bin/helper-{n}: No such file or directory", "", "bash", False),
    ("denied-write", "failed", "", "", "", "write_file", True),
]
TESTS = [f"test_{word}" for word in "output schema lint types format unicode edge empty large perf".split()]
TIMEOUT_WITH_REWARD = "timed out with a reward"


def create_trials(count: int, timeouts: int, seed: int = 0) -> dict[int, str]:
    """{trial pk: its cause}."""
    from trials.models import (
        Configuration,
        Dataset,
        Job,
        PermissionDecision,
        RuntimeEvent,
        Step,
        Task,
        ToolCall,
        Trajectory,
        Trial,
    )

    rng = random.Random(seed)
    dataset = Dataset.objects.create(name="bench/triage", version="1")
    tasks = Task.objects.bulk_create(
        [Task(dataset=dataset, name=f"task-{i:03d}", checksum=f"{i:064x}") for i in range(200)]
    )
    conf = Configuration.objects.create(key="candidate-bench", role="candidate")
    job = Job.objects.create(key="bench-triage", name="triage-job", source_format="harbor")
    rows, causes = [], []
    for i in range(count + timeouts):
        if i < count:
            name, status, exception, template, category, tool, safety = CAUSES[i % len(CAUSES)]
            reward = 0.0 if status == "failed" else None
        else:
            name, status, exception, template, category, tool, safety = (
                TIMEOUT_WITH_REWARD, "timeout", "AgentTimeoutError", "Agent timed out after {n} s", "", "", False
            )  # fmt: skip
            reward = rng.choice([0.5, 1.0])
        message = template.format(n=rng.randint(1, 99_999), m=rng.randint(1, 59), h=f"{rng.getrandbits(40):010x}")
        failing = rng.choice(TESTS)
        rows.append(
            Trial(
                key=f"bench:{i}",
                source_format="harbor",
                name=f"trial-{i:05d}",
                job=job,
                dataset=dataset,
                task=rng.choice(tasks),
                configuration=conf,
                status=status,
                reward=reward,
                exception_type=exception,
                exception_message=message,
                failure_category=category,
                ctrf_tests=[{"name": "test_setup", "status": "passed"}, {"name": failing, "status": "failed"}],
            )
        )
        # A failure with no error text, category, tool or flag, or a timeout, is known by its failing test
        # (issue 39: no catch-all cluster), so its cause is the test.
        quiet = not (message or exception or category or tool or safety) or status == "timeout"
        causes.append((f"{name}: {failing}" if quiet else name, tool, safety))
    trials = Trial.objects.bulk_create(rows, batch_size=2_000)
    trajectories = Trajectory.objects.bulk_create(
        [Trajectory(trial=t, path="agent/trajectory.json", role="main", position=0) for t in trials], batch_size=2_000
    )
    steps, calls, events, denials = [], [], [], []
    for trial, trajectory, (_, tool, safety) in zip(trials, trajectories, causes, strict=True):
        steps.append(Step(trial=trial, trajectory=trajectory, index=0, step_id="1", source="user"))
        steps += [
            Step(trial=trial, trajectory=trajectory, index=n, step_id=str(n + 1), source="agent") for n in (1, 2, 3)
        ]
        if tool:
            events.append(RuntimeEvent(trial=trial, type="tool.failed", sequence=3, payload={"toolName": tool}))
        if safety:
            denials.append(
                PermissionDecision(
                    trial=trial,
                    action_id=f"act-{trial.pk}",
                    tool_name=tool,
                    decision="deny",
                    side_effect_after_denial=True,
                )
            )
    steps = Step.objects.bulk_create(steps, batch_size=2_000)
    tool_of = {t.pk: tool for t, (_, tool, _) in zip(trials, causes, strict=True) if tool}
    calls = [
        ToolCall(trial_id=s.trial_id, step=s, tool_call_id=f"call-{s.pk}", function_name=tool_of[s.trial_id])
        for s in steps
        if s.index == 2 and s.trial_id in tool_of
    ]
    ToolCall.objects.bulk_create(calls, batch_size=2_000)
    RuntimeEvent.objects.bulk_create(events, batch_size=2_000)
    PermissionDecision.objects.bulk_create(denials, batch_size=2_000)
    return {t.pk: name for t, (name, _, _) in zip(trials, causes, strict=True)}


def clustering(causes: dict[int, str]) -> tuple[int, float, dict[int, int]]:
    """(clusters formed, purity, {cluster pk: trials})."""
    from trials.models import Trial

    members: dict[int, Counter[str]] = defaultdict(Counter)
    for pk, cluster_id in Trial.objects.filter(pk__in=causes).values_list("pk", "cluster_id"):
        members[cluster_id or 0][causes[pk]] += 1
    majority = sum(counter.most_common(1)[0][1] for counter in members.values())
    return len(members), majority / len(causes), {pk: sum(c.values()) for pk, c in members.items()}


def file_every_cluster(base_url: str, session_cookie: dict, cluster_ids: list[int]) -> dict[int, int]:
    """A scripted triager files each cluster from its page: {cluster pk: actions it took}."""
    from playwright.sync_api import sync_playwright

    actions: dict[int, int] = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        context.add_cookies([session_cookie])
        page = context.new_page()
        for cluster_id in cluster_ids:
            page.goto(f"{base_url}/qc/clusters/{cluster_id}/")  # 1: open the cluster
            page.check("#cluster-form input[name=kind][value=release-blocker]")  # 2: file it as a blocker
            with page.expect_navigation():
                page.click("#file-cluster")  # 3: file (category, code and severity come prefilled)
            if "/qc/items/" not in page.url:
                errors = page.locator(".error, .errorlist").all_inner_texts()
                raise SystemExit(f"filing cluster {cluster_id} was refused: {errors}")
            actions[cluster_id] = 3
        browser.close()
    return actions


def links_complete(cluster_sizes: dict[int, int]) -> tuple[int, int]:
    """(items whose every cited trial links its page and its step or failing test, items filed)."""
    from trials.models.qc import QCItem
    from trials.triage.evidence_links import citation_links

    good = 0
    items = list(QCItem.objects.filter(cluster__isnull=False))
    for item in items:
        cited = citation_links(list(item.citations.select_related("trial")))
        linked = [
            c
            for c in cited
            if c["url"] and any(r["url"] and r["kind"] in ("step", "criterion") for r in c["refs"])  # type: ignore[attr-defined]
        ]
        good += len(linked) == cluster_sizes.get(item.cluster_id or 0) and bool(item.evidence_refs)
    return good, len(items)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--timeouts", type=int, default=20)
    parser.add_argument("--port", type=int, default=8776)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 120 failed trials and 4 timeouts")
    args = parser.parse_args()
    if args.quick:
        args.trials, args.timeouts = 120, 4

    with tempfile.TemporaryDirectory(prefix="triage-bench-") as data_dir:
        setup_django(data_dir)
        from django.conf import settings
        from django.contrib.auth import get_user_model
        from django.test import Client

        from core import roles
        from trials.models import Trial
        from trials.triage import signatures

        causes = create_trials(args.trials, args.timeouts)
        start = time.perf_counter()
        signatures.sign_trials(causes)
        signed_s = time.perf_counter() - start
        formed, purity, sizes = clustering(causes)
        flagged = set(Trial.objects.filter(is_flagged=True).values_list("pk", flat=True))
        queued = set(Trial.objects.untriaged().filter(pk__in=flagged).values_list("pk", flat=True))
        timed_out = {pk for pk, cause in causes.items() if cause.startswith(TIMEOUT_WITH_REWARD)}

        user = get_user_model().objects.create_user("bench-triager", password="bench-pw-1")
        roles.add_to_group(user, "triager")
        client = Client()
        client.force_login(user)
        cookie = {"name": settings.SESSION_COOKIE_NAME, "value": client.cookies[settings.SESSION_COOKIE_NAME].value}
        refuse_port_in_use(args.port)
        server = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", f"127.0.0.1:{args.port}", "--noreload", "--nostatic"],
            cwd=REPO,
            env={**environment(data_dir), "DEBUG": "0"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        base_url = f"http://127.0.0.1:{args.port}"
        try:
            wait_until_up(f"{base_url}/accounts/login/", seconds=60)
            start = time.perf_counter()
            actions = file_every_cluster(base_url, cookie | {"url": base_url}, sorted(sizes))
            filed_s = time.perf_counter() - start
        finally:
            server.terminate()
            server.wait(timeout=10)
        linked, items = links_complete(sizes)

    total = args.trials + args.timeouts
    print(f"{args.trials:,} failed trials from {len(CAUSES)} causes + {args.timeouts} timed out with a reward")
    print(f"signed in {signed_s:.2f} s")
    known = len(set(causes.values()))
    print(f"clusters formed: {formed} for {known} known causes (target <= {known + 3})")
    print(f"purity: {purity:.1%} (target >= 95%)")
    print(f"flagged trials queued: {len(queued)} of {len(flagged)}")
    print(f"timed out with a reward, flagged: {len(timed_out & flagged)} of {len(timed_out)}")
    print(f"clusters filed by the scripted triager: {len(actions)} in {filed_s:.1f} s")
    most = max(actions.values(), default=0)
    print(f"actions per cluster: at most {most} (target <= 4); {sum(actions.values())} in all for {total:,} trials")
    print(f"items citing every trial of their cluster with a link to it and its step or test: {linked} of {items}")
    ok = (
        formed <= known + 3
        and purity >= 0.95
        and queued == flagged
        and timed_out <= flagged
        and most <= 4
        and linked == items
    )
    if not ok:
        raise SystemExit("a target was missed")


if __name__ == "__main__":
    main()
