"""A cluster's signature in words, for a page: its class, then what sets its cause apart."""

from __future__ import annotations

from typing import Any

from trials.models.taxonomy import FLAG_LABELS


def describe(signature: dict[str, Any]) -> str:
    """The signature in words, for a page: its class, then its cause (`cause_words`)."""
    failure_class = CLASS_LABELS.get(signature.get("class", ""), signature.get("status") or "failed")
    return f"{failure_class} · {cause_words(signature)}"


def cause_words(signature: dict[str, Any]) -> str:
    """A cluster's title beside its class badge: what sets it apart from the other clusters of its
    benchmark (category, exception, last tool, how it ended in the source's own term, flags, error text)."""
    parts = []
    if signature.get("category") or signature.get("code"):
        parts.append("/".join(p for p in (signature.get("category"), signature.get("code")) if p))
    if signature.get("exceptionType"):
        parts.append(signature["exceptionType"])
    if signature.get("tool"):
        parts.append(f"tool {signature['tool']}")
    detail = told_apart_words(signature)
    if ended := signature.get("ended"):
        words = ENDED_LABELS.get(ended, ended)
        if "_" in ended:  # (the source's own term beside ours: Terminal-Bench's `agent_timeout`, `parse_error`)
            words = f"{words} ({ended})"
        if ended == "tests failed" and signature.get("test"):
            words = f"{words}: {signature['test']}"
        elif detail:
            words = f"{words}, {detail}"
        parts.append(f"{words}, in {signature['benchmark']}" if signature.get("benchmark") else words)
    elif signature.get("benchmark"):
        parts.append(
            f"no error, {detail}, in {signature['benchmark']}" if detail else f"no error, in {signature['benchmark']}"
        )
    elif detail:
        parts.append(detail)
    for facet, value in (signature.get("split") or {}).items():
        parts.append(f"{facet} {value}")
    if signature.get("flags"):
        parts.append("flagged: " + ", ".join(FLAG_LABELS.get(f, f) for f in signature["flags"]))
    text = " · ".join(parts)
    if signature.get("message"):
        return f"{text}: {signature['message']}" if text else signature["message"]
    return text or "no error text"


ENDED_LABELS = {
    "agent_timeout": "the agent timed out",
    "test_timeout": "the tests timed out",
    "parse_error": "the tests' output could not be read",
    "unknown_agent_error": "the agent failed",
    "timeout": "timed out",
    "errored": "errored",
    "cancelled": "cancelled",
    "limit": "hit a limit",
    "unscored": "unscored",
    "tests failed": "tests failed",
}

CLASS_LABELS = {
    "infrastructure": "infrastructure",
    "task_quality": "task quality",
    "capability": "capability",
    "safety": "safety",
    "flagged_pass": "flagged pass",
}


def told_apart_words(signature: dict[str, Any]) -> str:
    """What tells the cluster's runs apart from others that ended alike (signatures.told_apart), in words."""
    if signature.get("test"):
        return f"{signature['test']} failed"
    if signature.get("tests") == "passed":
        return "its tests passed"
    if signature.get("lastTool"):
        return f"last tool {signature['lastTool']}"
    return f"task {signature['task']}" if signature.get("task") else ""
