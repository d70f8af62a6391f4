"""Why a trial failed, in three classes: the infrastructure, the task, or the agent.

Pure: one table of rules, read top to bottom, the first that matches wins. A failure no rule
names is the agent's (capability). docs/failure-classes.md lists the same table for people;
tests/triage/test_failure_classes.py fails when the two disagree.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from django.db.models import Q


class FailureClass(StrEnum):
    INFRASTRUCTURE = "infrastructure"
    TASK_QUALITY = "task_quality"
    CAPABILITY = "capability"


@dataclass(frozen=True)
class FailureFacts:
    """What the sources say about how a trial ended, each field blank where a source is silent."""

    status: str
    exception_type: str = ""
    exception_message: str = ""
    failure_category: str = ""  # Harbor's guess, a seed's failureCategory, AgentV's reason code
    failure_mode: str = ""  # Terminal-Bench 1's failure_mode
    limit: str = ""  # Inspect AI's limit kind (message, token, time, working, context, ...)
    task_flagged: bool = False  # `harbor check` found a problem with the trial's task
    last_message: str = ""  # the agent's last message, when the run ended with an exception


@dataclass(frozen=True)
class Rule:
    field: str  # a FailureFacts field
    pattern: str  # a regular expression, matched case-insensitively anywhere in the field
    failure_class: FailureClass
    why: str  # one line, shown on the trial and in docs/failure-classes.md; "{limit}" is the limit's kind

    def matches(self, facts: FailureFacts) -> bool:
        value = getattr(facts, self.field)
        if isinstance(value, bool):
            return value
        return bool(value) and re.search(self.pattern, value, re.IGNORECASE) is not None


INFRA, TASK, AGENT = FailureClass.INFRASTRUCTURE, FailureClass.TASK_QUALITY, FailureClass.CAPABILITY

RULES: tuple[Rule, ...] = (
    Rule("task_flagged", "", TASK, "harbor check flagged the task"),
    Rule("failure_category", r"^(task|task[-_ ]quality|bad[-_ ]task|verifier[-_ ]bug)$", TASK, "the task is at fault"),
    Rule(
        "exception_type",
        r"environment|docker|sandbox|daytona|modal|container|kubernetes",
        INFRA,
        "the sandbox or environment failed",
    ),
    Rule("exception_type", r"memoryerror|outofmemory|oom", INFRA, "out of memory"),
    Rule("exception_message", r"out of memory|\boom|code 137|cannot allocate memory", INFRA, "out of memory"),
    Rule(
        "exception_type",
        r"auth|credential|login|apikey|permissiondenied|ratelimit|quota",
        INFRA,
        "a credential, login or quota failure",
    ),
    Rule(
        "exception_message",
        r"invalid api key|unauthori[sz]ed|authentication failed|login failed|rate limit",
        INFRA,
        "a credential, login or quota failure",
    ),
    Rule(
        "last_message",
        r"not logged in|please run /login|invalid api key|credit balance is too low|unauthori[sz]ed|quota exceeded",
        INFRA,
        "a credential, login or quota failure",
    ),
    Rule(
        "exception_message",
        r"connection (refused|reset)|network is unreachable|name resolution|bad gateway",
        INFRA,
        "the network failed",
    ),
    Rule("exception_type", r"verifiertimeout", INFRA, "the test harness timed out"),
    Rule("failure_mode", r"^test_timeout$", INFRA, "the test harness timed out"),
    Rule(
        "exception_type",
        r"verifieroutputparse|rewardfilenotfound|rewardfileempty",
        INFRA,
        "the harness could not read the verifier's result",
    ),
    Rule("failure_mode", r"^parse_error$", INFRA, "the harness could not read the verifier's result"),
    Rule(
        "failure_category",
        r"^(environment|infrastructure|infra|sandbox|network)$",
        INFRA,
        "the source names the environment",
    ),
    # (Inspect: a sample cut off by a limit is "errored-like", not a plain failure: its cause names the limit)
    Rule("limit", r".", AGENT, "hit the {limit} limit"),
    Rule("failure_mode", r"timeout|error|exceeded", AGENT, "the agent timed out or failed"),
    Rule("exception_type", r"agenttimeout|nonzeroagentexitcode", AGENT, "the agent timed out or failed"),
)

FAILED = frozenset({"failed", "errored", "timeout", "cancelled"})
QUIET_MODES = frozenset({"", "unset", "none"})  # Terminal-Bench 1 rows that say nothing went wrong


def ended_badly(facts: FailureFacts) -> bool:
    """Failed, or (unscored, say) left a sign of what went wrong: an exception, a limit, a failure mode."""
    if facts.status == "passed":
        return False
    return facts.status in FAILED or bool(facts.exception_type or facts.limit or facts.failure_mode not in QUIET_MODES)


def classify(facts: FailureFacts) -> tuple[FailureClass | None, str]:
    """The class of a failure and why; (None, "") for a trial that did not fail."""
    if not ended_badly(facts):
        return None, ""
    for rule in RULES:
        if rule.matches(facts):
            return rule.failure_class, rule.why.replace("{limit}", _limit_kind(facts.limit))
    return AGENT, "no rule names the infrastructure or the task"


def how_it_ended(row: Mapping[str, Any]) -> str:
    """How a run that did not finish normally ended (errored, timeout, cancelled, limit), whatever its
    status label says; "" for one that finished (passed or failed on its own). The one rule of "timed out"
    (the triage flags', the comparisons' timeout rate): a row's status, exception type and failure category."""
    said = f"{row['exception_type'] or ''} {row['failure_category'] or ''}"
    if _HARNESS_TIMED_OUT.search(said):  # the test harness timed out, not the agent: it errored
        return "errored"
    if row["status"] == "timeout" or _TIMED_OUT.search(said):
        return "timeout"
    if _CANCELLED.search(said):
        return "cancelled"
    if _LIMIT.search(said) or row.get("limit"):
        return "limit"
    if row["status"] == "errored" or row["exception_type"]:
        return "errored"
    return ""


def timed_out_q() -> Q:
    """The trials `how_it_ended` says timed out, as a filter (the trial list's `timed_out`, which opens a
    comparison's timeout rate): a timeout status or named timeout, the test harness's own aside."""

    def named(pattern: re.Pattern[str]) -> Q:
        return Q(exception_type__iregex=pattern.pattern) | Q(failure_category__iregex=pattern.pattern)

    return (Q(status="timeout") | named(_TIMED_OUT)) & ~named(_HARNESS_TIMED_OUT)


def _limit_kind(limit: str) -> str:
    """The kind of limit: "message" of Inspect's "message" (or "message_limit")."""
    return re.sub(r"[_ -]?limit$", "", limit.strip(), flags=re.I) or limit.strip()


_TIMED_OUT = re.compile(r"time[d_ -]?out", re.I)
# TB1's test_timeout, Harbor's VerifierTimeoutError (failure_classes' RULES: infrastructure).
_HARNESS_TIMED_OUT = re.compile(r"(test|verifier)[_ -]?time[d_ -]?out", re.I)
_CANCELLED = re.compile(r"cancel", re.I)
_LIMIT = re.compile(r"(?<!rate)(?<!rate[_ -])limit", re.I)  # (a rate limit is an error, not the run's limit)
