"""Failure signatures and safety flags: what puts a trial in a failure cluster.

A failed, errored or timed-out trial, and a passing one a safety signal flagged, gets a
signature: status, failure category and code, exception type, the error text with its
numbers, paths, ids, hex and timestamps replaced by placeholders, the failing tool, the
first failing verifier test and its safety flags. Trials with the same signature share a
FailureCluster row (Trial.cluster), so a cluster's size is a GROUP BY on an indexed column.

`sign_trials` is called by the import for the trials it wrote or joined, and by
`manage.py sign_failures` for rows imported before (the backfill).
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import orjson
from django.db import transaction
from django.db.models import BooleanField, ExpressionWrapper, Q
from django.db.models.fields.json import KT
from django.utils import timezone

from trials.models import PermissionDecision, RuntimeEvent, Trial
from trials.triage import taxonomy
from trials.triage.failure_classes import FailureFacts, classify
from trials.triage.models import FailureCluster

# Safety flags: each one makes its trial a failure to triage, whatever its reward.
SIDE_EFFECT_AFTER_DENIAL = "side-effect-after-denial"
PERMISSION_BYPASS = "permission-bypass"
STALE_SUCCESS = "stale-success"
ERRORED_WITH_REWARD = "errored-with-reward"
FLAG_LABELS = {
    SIDE_EFFECT_AFTER_DENIAL: "a side effect after a denied permission",
    PERMISSION_BYPASS: "a permission-bypass event",
    STALE_SUCCESS: "a stale success",
    ERRORED_WITH_REWARD: "an errored trial that still has a reward",
}
FLAG_CHOICES = [(flag, label) for flag, label in FLAG_LABELS.items()]

MESSAGE_CHARS = 300  # of the normalised error text: enough to tell causes apart
BATCH = 2000  # trials read per query

# Most specific first: a timestamp holds numbers, a path may hold a hex id.
_PLACEHOLDERS = [
    (re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?"), "<ts>"),
    (re.compile(r"\b\d{1,2}:\d{2}:\d{2}(\.\d+)?\b"), "<ts>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I), "<id>"),
    (re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.I), "<url>"),
    (re.compile(r"(?<![\w.])(?:[A-Za-z]:\\|~?/|\./|\.\./)[^\s'\"`:,;()\[\]{}<>]*"), "<path>"),
    (re.compile(r"\b0x[0-9a-f]+\b", re.I), "<hex>"),
    (re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,}\b", re.I), "<hex>"),
    (re.compile(r"\b[A-Za-z]+[_-](?=[A-Za-z0-9]*\d)[A-Za-z0-9]{4,}\b"), "<id>"),  # call_8f2k, sess-91ab
    (re.compile(r"\d+(\.\d+)?"), "<n>"),
]
_SPACES = re.compile(r"\s+")


def normalise_message(text: str) -> str:
    """The error text with what varies between runs of one cause replaced by placeholders."""
    text = (text or "").strip()[: MESSAGE_CHARS * 4]  # (a traceback's first screen is enough)
    for pattern, placeholder in _PLACEHOLDERS:
        text = pattern.sub(placeholder, text)
    return _SPACES.sub(" ", text).strip()[:MESSAGE_CHARS]


def first_failing_test(ctrf_tests: Any) -> str:
    for test in ctrf_tests or []:
        if isinstance(test, dict) and str(test.get("status", "")).lower() in ("failed", "fail", "error"):
            return str(test.get("name") or "")[:200]
    return ""


def signature_of(row: dict[str, Any], flags: list[str], tool: str) -> dict[str, Any]:
    """A trial's signature from its row (`SIGNED_FIELDS`), its safety flags and its failing tool."""
    raw_category = row["failure_category"] or ""
    code = _code(raw_category)
    if not code and STALE_SUCCESS in flags:
        code = STALE_SUCCESS
    elif not code and PERMISSION_BYPASS in flags:
        code = PERMISSION_BYPASS
    category = _category(raw_category) or _category(code) or _exception_category(row["exception_type"])
    return {
        "status": row["status"],
        "category": category,
        "code": code,
        "exceptionType": row["exception_type"] or "",
        "message": normalise_message(row["exception_message"]),
        "tool": tool,
        "test": first_failing_test(row["ctrf_tests"]),
        "flags": sorted(flags),
    }


def signature_key(signature: dict[str, Any]) -> str:
    return hashlib.sha256(orjson.dumps(signature, option=orjson.OPT_SORT_KEYS)).hexdigest()


def describe(signature: dict[str, Any]) -> str:
    """The signature in words, for a page."""
    parts = [signature.get("status") or "failed"]
    if signature.get("category") or signature.get("code"):
        parts.append("/".join(p for p in (signature.get("category"), signature.get("code")) if p))
    if signature.get("exceptionType"):
        parts.append(signature["exceptionType"])
    if signature.get("tool"):
        parts.append(f"tool {signature['tool']}")
    if signature.get("test"):
        parts.append(f"test {signature['test']}")
    if signature.get("flags"):
        parts.append("flagged: " + ", ".join(FLAG_LABELS.get(f, f) for f in signature["flags"]))
    text = " · ".join(parts)
    return f"{text}: {signature['message']}" if signature.get("message") else text


# Reading what flags a trial, many trials a query ----------------------------------------------

SIGNED_FIELDS = ("pk", "status", "reward", "failure_category", "exception_type", "exception_message", "ctrf_tests")
# What a parser keeps in a trial's provenance for the failure classes: Terminal-Bench 1's
# failure_mode, the kind of Inspect limit a sample hit, a `harbor check` finding on its task.
CLASS_FACTS = {
    "failure_mode": KT("provenance__failure_mode"),
    "limit": KT("provenance__limit"),
    "task_flagged": KT("provenance__task_flagged"),
}
_BYPASS_CODES = ["permission-bypass", "permission_bypass"]
_STALE_CODES = ["stale-success", "stale_success"]


def denied_side_effects(trial_ids: Iterable[int]) -> dict[int, str]:
    """{trial pk: the tool} of trials with a permission denial after which the side effect happened anyway.

    The same fact the comparisons count (comparisons.metrics.denied_side_effects), per trial.
    """
    rows = (
        PermissionDecision.objects.side_effects_after_denial()
        .filter(trial_id__in=trial_ids)
        .order_by("-pk")  # the first denial's tool wins, written last
        .values_list("trial_id", "tool_name")
    )
    return dict(rows)


@dataclass
class Evidence:
    """What flags these trials and names their failing tool, read in two queries."""

    side_effects: dict[int, str]  # trial pk -> the tool that ran after its denial
    bypass: set[int]
    stale: set[int]
    failed_tools: dict[int, str]  # trial pk -> the first tool.failed event's tool

    @classmethod
    def of(cls, trial_ids: list[int]) -> Evidence:
        bypass_event = (
            Q(payload__failureCategory__in=_BYPASS_CODES)
            | Q(payload__decision="bypass")
            | Q(payload__mode="bypass")
            | Q(type__icontains="bypass")
        )
        stale_event = Q(payload__failureCategory__in=_STALE_CODES)
        events = (
            RuntimeEvent.objects.filter(Q(type="tool.failed") | bypass_event | stale_event, trial_id__in=trial_ids)
            .annotate(
                bypass=ExpressionWrapper(bypass_event, output_field=BooleanField()),
                stale=ExpressionWrapper(stale_event, output_field=BooleanField()),
            )
            .order_by("trial_id", "sequence", "timestamp", "pk")
            .values_list("trial_id", "type", KT("payload__toolName"), "bypass", "stale")
        )
        evidence = cls(denied_side_effects(trial_ids), set(), set(), {})
        for trial_id, etype, tool, bypass, stale in events:
            if bypass:
                evidence.bypass.add(trial_id)
            if stale:
                evidence.stale.add(trial_id)
            if etype == "tool.failed" and tool:
                evidence.failed_tools.setdefault(trial_id, str(tool)[:200])
        return evidence

    def flags(self, row: dict[str, Any]) -> list[str]:
        code = _code(row["failure_category"])
        found = []
        if row["pk"] in self.side_effects:
            found.append(SIDE_EFFECT_AFTER_DENIAL)
        if row["pk"] in self.bypass or code == PERMISSION_BYPASS:
            found.append(PERMISSION_BYPASS)
        if row["pk"] in self.stale or code == STALE_SUCCESS:
            found.append(STALE_SUCCESS)
        if row["status"] == Trial.Status.ERRORED and row["reward"] is not None:
            found.append(ERRORED_WITH_REWARD)
        return found

    def tool(self, pk: int) -> str:
        """The first tool that failed: a tool.failed event, else a denied call that ran anyway."""
        return self.failed_tools.get(pk) or self.side_effects.get(pk) or ""


# (thousands of trials share a handful of categories and exception types: each is read once)
_code = lru_cache(maxsize=512)(taxonomy.normalise_code)
_category = lru_cache(maxsize=512)(taxonomy.category_for)
_exception_category = lru_cache(maxsize=512)(taxonomy.category_from_exception)


# Writing ---------------------------------------------------------------------------------------


def sign_trials(trial_ids: Iterable[int]) -> int:
    """Give these trials their signature, cluster and flags; a trial neither failed nor flagged
    leaves its cluster. Returns how many trials are in a cluster now."""
    ids = sorted(set(trial_ids))
    clustered = 0
    for start in range(0, len(ids), BATCH):
        clustered += _sign_batch(ids[start : start + BATCH])
    return clustered


def sign_all() -> int:
    """Every trial that failed or may be flagged (the backfill): a passing trial is read only if it
    has a denial, an event or a category that could flag it."""
    maybe_flagged = (
        Q(status__in=Trial.FAILED_STATUSES)
        | Q(cluster__isnull=False)
        | Q(permissions__side_effect_after_denial=True)
        | Q(events__isnull=False)
        | ~Q(failure_category="")
        | ~Q(exception_type="")
    )
    return sign_trials(Trial.objects.filter(maybe_flagged).values_list("pk", flat=True).distinct())


def facts_of(row: dict[str, Any]) -> FailureFacts:
    """What the failure classes read, from a row of SIGNED_FIELDS and CLASS_FACTS."""
    return FailureFacts(
        status=row["status"],
        exception_type=row["exception_type"] or "",
        exception_message=row["exception_message"] or "",
        failure_category=row["failure_category"] or "",
        failure_mode=str(row["failure_mode"] or ""),
        limit=str(row["limit"] or ""),
        task_flagged=str(row["task_flagged"] or "").lower() in ("true", "1"),
    )


def _classify_batch(rows: list[dict[str, Any]]) -> None:
    """Store each trial's failure class by the rules (a triager's override stays beside it)."""
    targets: dict[tuple[str, str], list[int]] = defaultdict(list)
    for row in rows:
        failure_class, why = classify(facts_of(row))
        wanted = (str(failure_class or ""), why[:200])
        if wanted != (row["failure_class"], row["failure_class_why"]):
            targets[wanted].append(row["pk"])
    for (class_name, why), pks in targets.items():
        # updated_at moves so stored comparisons and grids see the new class
        Trial.objects.filter(pk__in=pks).update(
            failure_class=class_name, failure_class_why=why, updated_at=timezone.now()
        )


def _sign_batch(ids: list[int]) -> int:
    rows = list(
        Trial.objects.filter(pk__in=ids)
        .annotate(**CLASS_FACTS)
        .values(*SIGNED_FIELDS, *CLASS_FACTS, "cluster_id", "safety_flags", "failure_class", "failure_class_why")
    )
    _classify_batch(rows)
    evidence = Evidence.of(ids)
    signatures: dict[str, dict[str, Any]] = {}
    wanted: dict[int, tuple[str | None, tuple[str, ...]]] = {}
    for row in rows:
        found = evidence.flags(row)
        if row["status"] not in Trial.FAILED_STATUSES and not found:
            wanted[row["pk"]] = (None, ())
            continue
        signature = signature_of(row, found, evidence.tool(row["pk"]))
        key = signature_key(signature)
        signatures[key] = signature
        wanted[row["pk"]] = (key, tuple(found))
    with transaction.atomic():
        cluster_ids = _clusters_for(signatures)
        targets: dict[tuple[int | None, tuple[str, ...]], list[int]] = defaultdict(list)
        for row in rows:
            cluster_key, flags = wanted[row["pk"]]
            target = (cluster_ids.get(cluster_key) if cluster_key else None, flags)
            if target != (row["cluster_id"], tuple(row["safety_flags"] or ())):  # rewrite only what changed
                targets[target].append(row["pk"])
        for (cluster_id, flags), pks in targets.items():
            Trial.objects.filter(pk__in=pks).update(
                cluster_id=cluster_id, safety_flags=list(flags), is_flagged=bool(flags)
            )
        left = {row["cluster_id"] for row in rows if row["cluster_id"]} - set(cluster_ids.values())
        # A cluster its last trial left (a later redaction scrubbed its text, a re-score): its
        # signature may hold what is no longer anywhere else, so it goes.
        FailureCluster.objects.filter(pk__in=left, trials__isnull=True).delete()
    return sum(1 for key, _ in wanted.values() if key)


def _clusters_for(signatures: dict[str, dict[str, Any]]) -> dict[str, int]:
    """{signature key: cluster pk}, making the clusters not seen before (another import may race us)."""
    existing = dict(FailureCluster.objects.filter(key__in=signatures).values_list("key", "pk"))
    missing = [FailureCluster(key=k, signature=s) for k, s in signatures.items() if k not in existing]
    if missing:
        FailureCluster.objects.bulk_create(missing, ignore_conflicts=True)
        existing = dict(FailureCluster.objects.filter(key__in=signatures).values_list("key", "pk"))
    return existing
