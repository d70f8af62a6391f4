"""A database that went away (a restart, a cut network) is an outage, not a refusal of the data."""

from __future__ import annotations

import time

from django.db import DEFAULT_DB_ALIAS, InterfaceError, OperationalError, connections

WAIT_POLL_SECONDS = 1.0


class DatabaseOutage(Exception):
    """The database stopped answering mid-work: what was written stays, what was not is done again."""


def is_unreachable(exc: BaseException) -> bool:
    """A lost or refused connection: an OperationalError whose connection no longer answers.

    A lock timeout or SQLite's "database is locked" leaves the connection usable: that is the
    database refusing this write, not an outage."""
    if isinstance(exc, DatabaseOutage):
        return True
    if not isinstance(exc, OperationalError | InterfaceError):
        return False
    connection = connections[DEFAULT_DB_ALIAS]
    try:
        return connection.connection is None or not connection.is_usable()
    except Exception:  # (asking a dead connection can fail in its own way)
        return True


def wait_until_reachable(seconds: float) -> None:
    """Reconnect every WAIT_POLL_SECONDS until the database answers; the last error after `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        connections.close_all()
        try:
            connections[DEFAULT_DB_ALIAS].ensure_connection()
            return
        except (OperationalError, InterfaceError):
            if time.monotonic() > deadline:
                raise
            time.sleep(WAIT_POLL_SECONDS)
