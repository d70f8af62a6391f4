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
from typing import Any

import orjson
from django.db import transaction
from django.db.models import Q
from django.db.models.fields.json import KT

from trials.models import PermissionDecision, RuntimeEvent, Trial
from trials.triage import taxonomy
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
    text = (text or "").strip()
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
    code = taxonomy.normalise_code(raw_category)
    if not code and STALE_SUCCESS in flags:
        code = STALE_SUCCESS
    elif not code and PERMISSION_BYPASS in flags:
        code = PERMISSION_BYPASS
    category = (
        taxonomy.category_for(raw_category)
        or taxonomy.category_for(code)
        or taxonomy.category_from_exception(row["exception_type"])
    )
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
_BYPASS_CODES = ["permission-bypass", "permission_bypass"]
_STALE_CODES = ["stale-success", "stale_success"]


def denied_side_effect_trials(trial_ids: Iterable[int]) -> set[int]:
    """Trials with a permission denial after which the side effect happened anyway.

    The same fact the comparisons count (comparisons.metrics.denied_side_effects), per trial.
    """
    return set(
        PermissionDecision.objects.filter(
            trial_id__in=trial_ids, decision=PermissionDecision.Decision.DENY, side_effect_after_denial=True
        ).values_list("trial_id", flat=True)
    )


def _event_trials(trial_ids: list[int], condition: Q) -> set[int]:
    return set(RuntimeEvent.objects.filter(condition, trial_id__in=trial_ids).values_list("trial_id", flat=True))


def safety_flags(rows: list[dict[str, Any]]) -> dict[int, list[str]]:
    """{trial pk: its safety flags} for these trial rows (four queries, whatever their number)."""
    ids = [row["pk"] for row in rows]
    side_effects = denied_side_effect_trials(ids)
    bypass = _event_trials(
        ids,
        Q(payload__failureCategory__in=_BYPASS_CODES)
        | Q(payload__decision="bypass")
        | Q(payload__mode="bypass")
        | Q(type__icontains="bypass"),
    )
    stale = _event_trials(ids, Q(payload__failureCategory__in=_STALE_CODES))
    flags: dict[int, list[str]] = {}
    for row in rows:
        code = taxonomy.normalise_code(row["failure_category"])
        found = []
        if row["pk"] in side_effects:
            found.append(SIDE_EFFECT_AFTER_DENIAL)
        if row["pk"] in bypass or code == PERMISSION_BYPASS:
            found.append(PERMISSION_BYPASS)
        if row["pk"] in stale or code == STALE_SUCCESS:
            found.append(STALE_SUCCESS)
        if row["status"] == Trial.Status.ERRORED and row["reward"] is not None:
            found.append(ERRORED_WITH_REWARD)
        flags[row["pk"]] = found
    return flags


def failing_tools(trial_ids: list[int]) -> dict[int, str]:
    """The first tool that failed in each trial: a tool.failed event, else a denied call that ran anyway."""
    tools: dict[int, str] = {}
    failed = (
        RuntimeEvent.objects.filter(trial_id__in=trial_ids, type="tool.failed")
        .order_by("trial_id", "sequence", "timestamp", "pk")
        .values_list("trial_id", KT("payload__toolName"))
    )
    for trial_id, tool in failed:
        if tool:
            tools.setdefault(trial_id, str(tool)[:200])
    denied = (
        PermissionDecision.objects.filter(
            trial_id__in=trial_ids, decision=PermissionDecision.Decision.DENY, side_effect_after_denial=True
        )
        .order_by("trial_id", "pk")
        .values_list("trial_id", "tool_name")
    )
    for trial_id, tool in denied:
        if tool:
            tools.setdefault(trial_id, tool)
    return tools


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
    )
    return sign_trials(Trial.objects.filter(maybe_flagged).values_list("pk", flat=True).distinct())


def _sign_batch(ids: list[int]) -> int:
    rows = list(Trial.objects.filter(pk__in=ids).values(*SIGNED_FIELDS))
    flags = safety_flags(rows)
    tools = failing_tools([row["pk"] for row in rows])
    signatures: dict[str, dict[str, Any]] = {}
    targets: dict[tuple[str | None, tuple[str, ...]], list[int]] = defaultdict(list)
    for row in rows:
        found = flags[row["pk"]]
        if row["status"] not in Trial.FAILED_STATUSES and not found:
            targets[(None, ())].append(row["pk"])
            continue
        signature = signature_of(row, found, tools.get(row["pk"], ""))
        key = signature_key(signature)
        signatures[key] = signature
        targets[(key, tuple(found))].append(row["pk"])
    with transaction.atomic():
        cluster_ids = _clusters_for(signatures)
        for (key, found), pks in targets.items():
            Trial.objects.filter(pk__in=pks).update(
                cluster_id=cluster_ids.get(key) if key else None, safety_flags=list(found), is_flagged=bool(found)
            )
    return sum(len(pks) for (key, _), pks in targets.items() if key)


def _clusters_for(signatures: dict[str, dict[str, Any]]) -> dict[str, int]:
    """{signature key: cluster pk}, making the clusters not seen before (another import may race us)."""
    existing = dict(FailureCluster.objects.filter(key__in=signatures).values_list("key", "pk"))
    missing = [FailureCluster(key=k, signature=s) for k, s in signatures.items() if k not in existing]
    if missing:
        FailureCluster.objects.bulk_create(missing, ignore_conflicts=True)
        existing = dict(FailureCluster.objects.filter(key__in=signatures).values_list("key", "pk"))
    return existing
