"""Planning a job: every trial's outcome is decided before anything is written.

Deciding all outcomes first lets a few fixed slots guarantee the cases the viewer must
handle (timeouts, crashes, a permission bypass, missing files) whatever the seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from trials.demo.common import seeded_rng
from trials.demo.tasks import TaskSpec

SHORT_ALPHABET = "23456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
FAILURE_CATEGORIES = ("tool-result-missing", "stream-stuck", "permission-bypass", "stale-success")
INCOMPLETE_KINDS = ("trajectory", "reward_details", "manifest", "trial_pack")


@dataclass
class JobContext:
    """The job's settings: the same for every trial it writes."""

    out: Path
    job_name: str
    job_id: str
    role: str
    configuration_id: str
    agent: str
    model: str
    agent_version: str
    seed: int
    steps_per_trial: int
    observation_bytes: int
    with_extras: bool

    @property
    def model_short(self) -> str:
        return self.model.split("/", 1)[-1]

    @property
    def provider(self) -> str | None:
        return self.model.split("/", 1)[0] if "/" in self.model else None


@dataclass
class TrialPlan:
    index: int
    task: TaskSpec
    attempt: int
    trial_name: str
    outcome: str  # passed | failed | timeout | crash | no_verifier
    passed_tests: int
    efficiency: float
    missing: str | None = None  # one of INCOMPLETE_KINDS
    reward_txt: bool = False  # only verifier/reward.txt, no reward.json
    compaction: bool = False
    xss: bool = False
    permission: str | None = None  # approve | deny | bypass
    missing_context: bool = False
    failure_category: str = "none"

    @property
    def errored(self) -> bool:
        return self.outcome in ("timeout", "crash", "no_verifier")

    @property
    def passed(self) -> bool:
        return self.passed_tests == len(self.task.tests)


def _trial_name(task: str, rng: random.Random, taken: set[str]) -> str:
    while True:
        name = f"{task[:32]}__{''.join(rng.choice(SHORT_ALPHABET) for _ in range(7))}"
        if name not in taken:
            taken.add(name)
            return name


def plan_job(
    job_name: str,
    role: str,
    tasks: list[TaskSpec],
    attempts: int,
    seed: int,
    success_bias: float,
    with_extras: bool,
) -> list[TrialPlan]:
    plans: list[TrialPlan] = []
    taken: set[str] = set()
    for task in tasks:
        for attempt in range(1, attempts + 1):
            rng = seeded_rng(seed, job_name, task.name, attempt)
            # The pass/fail draw is shared by both jobs (common random numbers), so the
            # candidate's bias shows up as a clean improvement instead of noise.
            u = seeded_rng(seed, task.name, attempt, "success").random()
            passed = u < task.base_success + success_bias
            n_tests = len(task.tests)
            passed_tests = n_tests if passed else rng.randint(0, n_tests - 1)
            # ~9% errored: 3.5% timeouts (reward still valid), 3% agent crashes (verifier
            # still ran), 2.5% runner failures where the verifier never ran (no reward).
            x = rng.random()
            if x < 0.035:
                outcome = "timeout"
            elif x < 0.065:
                outcome = "crash"
            elif x < 0.09:
                outcome = "no_verifier"
            else:
                outcome = "passed" if passed else "failed"
            if outcome in ("crash", "no_verifier"):
                passed_tests = 0
            plan = TrialPlan(
                index=len(plans),
                task=task,
                attempt=attempt,
                trial_name=_trial_name(task.name, rng, taken),
                outcome=outcome,
                passed_tests=passed_tests,
                efficiency=round(rng.uniform(0.55, 0.98) if passed else rng.uniform(0.1, 0.6), 3),
                reward_txt=rng.random() < 0.12,
                compaction=rng.random() < 0.08,
                xss=rng.random() < 0.06,
                missing_context=rng.random() < 0.15,
            )
            p = rng.random()
            if p < 0.15:
                plan.permission = "approve"
            elif p < 0.25:
                plan.permission = "deny"
            if with_extras and rng.random() < 0.10:
                plan.missing = rng.choice(INCOMPLETE_KINDS)
            plans.append(plan)

    _guarantee_variety(plans, role, with_extras)
    for plan in plans:
        plan.failure_category = _failure_category(plan, seeded_rng(seed, job_name, plan.trial_name))
    return plans


def _guarantee_variety(plans: list[TrialPlan], role: str, with_extras: bool) -> None:
    """Make sure every case the viewer must handle exists, whatever the seed.

    Fixed slots are picked from the back half so small jobs still get most of them.
    """
    n = len(plans)
    if n == 0:
        return

    def slot(k: int) -> TrialPlan:
        return plans[(n - 1 - 2 * k) % n]

    if not any(p.outcome == "no_verifier" for p in plans):
        slot(0).outcome, slot(0).passed_tests = "no_verifier", 0
    if n > 2 and not any(p.outcome == "timeout" for p in plans):
        slot(1).outcome = "timeout"
    if n > 4 and not any(p.outcome == "crash" for p in plans):
        slot(2).outcome, slot(2).passed_tests = "crash", 0
    if not any(p.compaction for p in plans):
        plans[min(1, n - 1)].compaction = True
    if not any(p.xss for p in plans):
        plans[min(2, n - 1)].xss = True
    if not any(p.missing_context for p in plans):
        plans[0].missing_context = True
    if not any(p.reward_txt for p in plans if not p.errored):
        plans[min(3, n - 1)].reward_txt = True
    healthy = [p for p in plans if not p.errored] or plans
    if role == "candidate":
        # Exactly one permission bypass: a denied write that still completed.
        bypass = next((p for p in healthy if p.permission == "deny"), healthy[0])
        bypass.permission = "bypass"
    if with_extras and len(healthy) >= 12:
        for k, kind in enumerate(INCOMPLETE_KINDS):
            if not any(p.missing == kind for p in plans):
                healthy[4 + 2 * k].missing = kind


def _failure_category(plan: TrialPlan, rng: random.Random) -> str:
    if plan.permission == "bypass":
        return "permission-bypass"
    if plan.outcome == "timeout":
        return "stream-stuck"
    if plan.outcome == "crash":
        return "tool-result-missing"
    if plan.outcome == "no_verifier":
        return "stream-stuck"
    if plan.outcome == "passed":
        return "none"
    return rng.choice(("tool-result-missing", "stale-success"))
