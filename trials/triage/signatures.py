"""Failure signatures and safety flags: what puts a trial in a failure cluster.

A failed, errored or timed-out trial, and a passing one a flag marked, gets a signature:
its class (infrastructure, task quality, capability: trials.models.failure_classes; safety
for a safety signal), then its cause: failure category and code, exception type, the error
text with its numbers, paths, ids, hex and timestamps replaced by placeholders, the failing
tool and its flags. The first failing verifier test and the task are facets of a cluster
(Trial.failing_test, Trial.task), not part of it, but where nothing else names the cause (tests
failed, no error text) or the run timed out, the first failing test does, else the last tool the
agent called, else (nothing but the task known) the task: one cluster per test, tool or task, not one
catch-all (cluster_titles puts it in words). A message near-identical to one of a cluster of the same
family (the signature without its message) joins that cluster (rapidfuzz). A person's merge
(FailureCluster.merged_into) and split (split_from, split_on) are followed here, so they stay when
trials are signed again.

Trials with the same signature share a FailureCluster row (Trial.cluster), so a cluster's
size is a GROUP BY on an indexed column.

`sign_trials` is called by the import for the trials it wrote or joined, and by
`manage.py sign_failures` for rows imported before (the backfill).
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import replace
from functools import lru_cache
from typing import Any

import orjson
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from rapidfuzz import fuzz, process

from trials.models import Trial, taxonomy
from trials.models.failure_classes import QUIET_MODES, FailureClass, FailureFacts, classify, ended_badly, how_it_ended
from trials.models.qc import FailureCluster
from trials.models.taxonomy import (
    CANCELLED_WITH_REWARD,
    ERRORED_WITH_REWARD,
    FLAG_LABELS,
    LIMIT_WITH_REWARD,
    PERMISSION_BYPASS,
    SAFETY_SIGNALS,
    SIDE_EFFECT_AFTER_DENIAL,
    STALE_SUCCESS,
    TIMEOUT_WITH_REWARD,
)
from trials.models.trial import UNSCORED, counts_as_passed
from trials.triage.flag_evidence import CLASS_FACTS, LAST_TOOL, SIGNED_FIELDS, Evidence, code_of

__all__ = [
    "CANCELLED_WITH_REWARD",
    "ERRORED_WITH_REWARD",
    "FLAG_LABELS",
    "LIMIT_WITH_REWARD",
    "PERMISSION_BYPASS",
    "SIDE_EFFECT_AFTER_DENIAL",
    "STALE_SUCCESS",
    "TIMEOUT_WITH_REWARD",
]

MESSAGE_CHARS = 300  # of the normalised error text: enough to tell causes apart
# rapidfuzz's ratio (0-100) at which two normalised messages of one family are one cause: a
# word or two of a long message (a user name, a host) differ; a different error does not reach it.
SIMILAR_MESSAGE = 88
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


_PARAMETERS = re.compile(r"\[[^\[\]]*\]$")  # pytest's `test_roundtrip[True]`: one test, whatever its parameters


def failing_test_named(test: str) -> str:
    """A failing test as a cluster names it: without its parameters (`test_maze[2]` and `test_maze[3]` fail
    for one cause more often than not)."""
    return _PARAMETERS.sub("", test).strip() or test


def failure_class_of(row: dict[str, Any], flags: list[str]) -> str:
    """The class a person opens first: safety for a safety signal, else a triager's override, else a flagged
    pass for a trial that passed (a TB1 row resolved after its agent timed out: no failure, its reward kept
    after a bad ending is what to look at), else the rules' (failure_classes.classify) for how the run ended."""
    if SAFETY_SIGNALS & set(flags):
        return "safety"
    if row.get("failure_class_override"):
        return row["failure_class_override"]
    if counts_as_passed(row["status"], row["reward"], row.get("dataset__pass_reward")):
        return FailureCluster.Class.FLAGGED_PASS
    status = row["status"] if row["status"] in Trial.FAILED_STATUSES else how_it_ended(row) or "failed"
    found, _ = classify(replace(facts_of(row), status=status))
    return str(found or FailureClass.CAPABILITY)


# What names a failure's cause in its signature; a signature with none of them also says how the run
# ended and names its benchmark.
CAUSES = ("category", "code", "exceptionType", "message", "tool", "flags")


def ended_as(row: dict[str, Any]) -> str:
    """How a run with no error text ended, as its source says: Terminal-Bench's failure_mode, the kind of
    Inspect limit, a timeout or error, unscored (no reward), its tests failed; "" when nothing says."""
    if (mode := str(row.get("failure_mode") or "")) and mode.lower() not in QUIET_MODES:
        return mode
    if row.get("limit"):
        return f"{row['limit']} limit"
    if ended := how_it_ended(row):
        return ended
    if row["reward"] is None:
        return "unscored"
    return "tests failed" if first_failing_test(row["ctrf_tests"]) else ""


def signature_of(row: dict[str, Any], flags: list[str], tool: str) -> dict[str, Any]:
    """A trial's signature from its row (`SIGNED_FIELDS`), its flags and its failing tool: its class,
    then its cause. Its status, task and failing test are not part of it (facets of its cluster)."""
    raw_category = row["failure_category"] or ""
    code = code_of(raw_category)
    if not code and STALE_SUCCESS in flags:
        code = STALE_SUCCESS
    elif not code and PERMISSION_BYPASS in flags:
        code = PERMISSION_BYPASS
    category = _category(raw_category) or _category(code) or _exception_category(row["exception_type"])
    signature = {
        "class": failure_class_of(row, flags),
        "category": category,
        "code": code,
        "exceptionType": row["exception_type"] or "",
        "message": normalise_message(row["exception_message"]),
        "tool": tool,
        "flags": sorted(SAFETY_SIGNALS & set(flags)),  # (a reward kept after a bad ending is a facet, not a cause)
    }
    if not any(signature[k] for k in CAUSES):
        # No error text (a wrong answer, tests failed, a timeout the source names only by its mode): such
        # trials share how they ended, what else tells them apart and their benchmark, not one catch-all.
        # (Absent otherwise: other keys stay as they were.)
        if ended := ended_as(row):
            signature["ended"] = ended
        # (a trial known only by its task, as one a Harbor job's stats alone name, with no step: one cluster a
        # task; wrong answers with a transcript stay one cluster a benchmark, not one of each)
        signature |= told_apart(row) or ({} if ended or row["step_count"] else {"task": row["task__name"] or ""})
        signature["benchmark"] = row["dataset__name"] or ""
    elif how_it_ended(row) == "timeout":  # (one timeout message for every task: the test or tool tells them apart)
        signature |= told_apart(row)
    return signature


def told_apart(row: dict[str, Any]) -> dict[str, str]:
    """What tells apart runs that ended alike: the first failing test when the tests ran ("passed" when
    none failed), else the last tool the agent called; {} when nothing is known."""
    if test := first_failing_test(row["ctrf_tests"]):
        return {"test": failing_test_named(test)}
    if row["ctrf_tests"]:
        return {"tests": "passed"}
    return {"lastTool": str(row["last_tool"])[:200]} if row.get("last_tool") else {}


def family_key(signature: dict[str, Any]) -> str:
    """The signature without its message: clusters whose messages may merge."""
    return signature_key({k: v for k, v in signature.items() if k != "message"})


def signature_key(signature: dict[str, Any]) -> str:
    return hashlib.sha256(orjson.dumps(signature, option=orjson.OPT_SORT_KEYS)).hexdigest()


# (thousands of trials share a handful of categories and exception types: each is read once)
_category = lru_cache(maxsize=512)(taxonomy.category_for)
_exception_category = lru_cache(maxsize=512)(taxonomy.category_from_exception)


# Writing ---------------------------------------------------------------------------------------


def sign_trials(trial_ids: Iterable[int]) -> int:
    """Give these trials their signature, cluster and flags; a trial neither failed, unscored nor flagged
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
        | UNSCORED
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
        last_message=str(row["last_message"] or "")[:MESSAGE_CHARS],
    )


def _classify_batch(rows: list[dict[str, Any]]) -> None:
    """Store each trial's failure class by the rules (a triager's override stays beside it)."""
    targets: dict[tuple[str, str], list[int]] = defaultdict(list)
    for row in rows:
        # (however it ended: no failure, no class)
        passed = counts_as_passed(row["status"], row["reward"], row.get("dataset__pass_reward"))
        failure_class, why = classify(replace(facts_of(row), status="passed") if passed else facts_of(row))
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
        .annotate(**CLASS_FACTS, **LAST_TOOL)
        .values(
            *SIGNED_FIELDS,
            *CLASS_FACTS,
            *LAST_TOOL,
            "cluster_id",
            "safety_flags",
            "failing_test",
            "failure_class",
            "failure_class_why",
            "failure_class_override",
        )
    )
    _classify_batch(rows)
    evidence = Evidence.of(ids)
    signatures: dict[str, dict[str, Any]] = {}
    wanted: dict[int, tuple[str | None, tuple[str, ...], str]] = {}
    for row in rows:
        found = evidence.flags(row)
        test = first_failing_test(row["ctrf_tests"])
        unscored = row["status"] == Trial.Status.UNKNOWN and row["reward"] is None  # in the queue: in a cluster
        if row["status"] not in Trial.FAILED_STATUSES and not unscored and not ended_badly(facts_of(row)) and not found:
            wanted[row["pk"]] = (None, (), test)
            continue
        signature = signature_of(row, found, evidence.tool(row["pk"]))
        key = signature_key(signature)
        signatures[key] = signature
        wanted[row["pk"]] = (key, tuple(found), test)
    with transaction.atomic():
        cluster_ids = _clusters_for(signatures)
        splits = _splits_of(set(cluster_ids.values()))
        targets: dict[tuple[int | None, tuple[str, ...], str], list[int]] = defaultdict(list)
        for row in rows:
            cluster_key, flags, test = wanted[row["pk"]]
            cluster_id = cluster_ids.get(cluster_key) if cluster_key else None
            if cluster_id in splits:
                cluster_id = _split_for(splits[cluster_id], {"task": row["task__name"] or "", "test": test}, cluster_id)
            target = (cluster_id, flags, test)
            if target != (row["cluster_id"], tuple(row["safety_flags"] or ()), row["failing_test"]):
                targets[target].append(row["pk"])  # rewrite only what changed
        for (cluster_id, flags, test), pks in targets.items():
            # updated_at moves so stored comparisons and grids see the new flags (they count "-with-reward")
            Trial.objects.filter(pk__in=pks).update(
                cluster_id=cluster_id,
                safety_flags=list(flags),
                is_flagged=bool(flags),
                failing_test=test,
                updated_at=timezone.now(),
            )
        left = {row["cluster_id"] for row in rows if row["cluster_id"]} - set(cluster_ids.values())
        # A cluster its last trial left (a later redaction scrubbed its text, a re-score): its
        # signature may hold what is no longer anywhere else, so it goes; one a person made or
        # merged into stays, as their hand must outlive re-clustering.
        FailureCluster.objects.filter(
            pk__in=left, trials__isnull=True, merged__isnull=True, split_from__isnull=True, splits__isnull=True
        ).delete()
    return sum(1 for key, _, _ in wanted.values() if key)


def _clusters_for(signatures: dict[str, dict[str, Any]]) -> dict[str, int]:
    """{signature key: cluster pk}: its own cluster, else one of its family with a near-identical
    message, else a new one (another import may race us); a merged cluster answers its target."""
    existing = dict(FailureCluster.objects.filter(key__in=signatures).values_list("key", "pk"))
    new = {k: s for k, s in signatures.items() if k not in existing}
    if new:
        families = {k: family_key(s) for k, s in new.items()}
        known: dict[str, dict[str, int]] = defaultdict(dict)  # family -> {message: cluster pk}
        for family, message, pk in FailureCluster.objects.filter(
            family__in=set(families.values()), split_from__isnull=True
        ).values_list("family", "signature__message", "pk"):
            known[family].setdefault(message or "", pk)
        made: dict[str, dict[str, str]] = defaultdict(dict)  # family -> {message: key of the new cluster}
        alias: dict[str, str] = {}  # new key -> the new key of a near-identical message
        for key in sorted(new, key=lambda k: (new[k]["message"], k)):
            family, message = families[key], new[key]["message"]
            if pk := _similar(message, known[family]):
                existing[key] = pk
            elif other := _similar(message, made[family]):
                alias[key] = other
            else:
                made[family][message] = key
        FailureCluster.objects.bulk_create(
            [
                FailureCluster(key=key, signature=new[key], family=families[key], failure_class=new[key]["class"])
                for messages in made.values()
                for key in messages.values()
            ],
            ignore_conflicts=True,
        )
        created = dict(FailureCluster.objects.filter(key__in=list(made_keys(made))).values_list("key", "pk"))
        existing |= created | {key: created[other] for key, other in alias.items() if other in created}
    merged = dict(
        FailureCluster.objects.filter(pk__in=set(existing.values()), merged_into__isnull=False).values_list(
            "pk", "merged_into_id"
        )
    )
    return {key: merged.get(pk, pk) for key, pk in existing.items()}


def made_keys(made: dict[str, dict[str, str]]) -> list[str]:
    return [key for messages in made.values() for key in messages.values()]


def _similar(message: str, choices: dict[str, Any]) -> Any:
    """What `choices` holds for the message nearest this one, if near enough; exact first."""
    if message in choices:
        return choices[message]
    if not message or not choices:
        return None
    found = process.extractOne(message, list(choices), scorer=fuzz.ratio, score_cutoff=SIMILAR_MESSAGE)
    return choices[found[0]] if found else None


def _splits_of(cluster_ids: set[int]) -> dict[int, list[tuple[dict[str, str], int]]]:
    """{cluster pk: [(what a trial must have, the split's pk)]} for the clusters a person split."""
    found: dict[int, list[tuple[dict[str, str], int]]] = defaultdict(list)
    rows = FailureCluster.objects.filter(split_from_id__in=cluster_ids).order_by("pk")
    for parent, split_on, pk, merged_into in rows.values_list("split_from_id", "split_on", "pk", "merged_into_id"):
        found[parent].append((split_on or {}, merged_into or pk))
    return found


def _split_for(splits: list[tuple[dict[str, str], int]], facets: dict[str, str], default: int) -> int:
    for split_on, pk in splits:
        if split_on and all(facets.get(facet) == value for facet, value in split_on.items()):
            return pk
    return default
