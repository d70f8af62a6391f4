"""A Lime thread snapshot (threads, their turns, pending requests and incidents; tasks and their
attempts): kept whole as a document, with its counts. lime.py reads the other Lime files.
"""

from __future__ import annotations

from typing import Any

from trials.ingest.records import ParsedDocument
from trials.ingest.values import pick, to_str


def is_thread_snapshot(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and "type" not in data
        and isinstance(data.get("threads"), list)
        and ("sessionId" in data or "session_id" in data)
    )


def parse_thread_snapshot(data: dict[str, Any], path: str) -> ParsedDocument:
    threads = [t for t in data.get("threads") or [] if isinstance(t, dict)]
    tasks = [t for t in data.get("tasks") or [] if isinstance(t, dict)]
    return ParsedDocument(
        kind="lime-thread-snapshot",
        path=path,
        title=to_str(pick(data, "sessionId", "session_id")),
        data=data,
        counts={
            "threads": len(threads),
            "turns": sum(len(t.get("turns") or []) for t in threads),
            "pending_requests": sum(len(t.get("pendingRequests") or []) for t in threads),
            "incidents": sum(len(t.get("incidents") or []) for t in threads),
            "tasks": len(tasks),
            "attempts": sum(len(t.get("attempts") or []) for t in tasks),
        },
    )
