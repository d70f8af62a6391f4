"""Every MCP tool reads and writes through the REST API's own view, as the caller.

So a tool keeps the API's rights per role (`core.roles.RolePermission` in the view: a viewer's
agent files nothing), its redaction and its serializers: there is no second way to read a trial.
The view is found by its path (`django.urls.resolve`) and called with a request authenticated as
the user the MCP connection speaks for (DRF's forced authentication: the token was checked once,
at `/mcp/`, or the user named to `manage.py mcp`).
"""

from __future__ import annotations

import contextvars
import json
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.test import RequestFactory
from django.urls import resolve
from mcp.server.mcpserver.exceptions import ToolError

MAX_TEXT = 2000  # characters of one string in an answer; the rest is said, not sent
MAX_ITEMS = 50  # items of one list in an answer
MAX_ANSWER = 60_000  # characters of a whole answer, as JSON

_factory = RequestFactory()
# Where the caller reaches the site: the links an answer holds (a share link's) point there. Set by the
# transport: `/mcp/`'s own scheme and host, or `manage.py mcp --url`.
ORIGIN: contextvars.ContextVar[str] = contextvars.ContextVar("benchviewer_mcp_origin", default="")


def origin() -> tuple[bool, str]:
    """(https?, host) of ORIGIN; by default the first of ALLOWED_HOSTS, over http."""
    parts = urlsplit(ORIGIN.get() or f"http://{settings.ALLOWED_HOSTS[0]}")
    return parts.scheme == "https", parts.netloc


def call(user: Any, method: str, path: str, params: dict[str, Any] | None = None, body: Any = None) -> Any:
    """The API's answer to `method path` for `user`, as data; a ToolError naming the status otherwise."""
    query = {key: value for key, value in (params or {}).items() if value not in (None, "")}
    secure, host = origin()
    if method == "GET":
        request = _factory.get(path, query, secure=secure, headers={"host": host})
    else:
        payload = json.dumps(body or {})
        request = _factory.generic(method, path, payload, "application/json", secure=secure, headers={"host": host})
    request._force_auth_user = user  # type: ignore[attr-defined]  # DRF's Request reads it as the caller
    match = resolve(path)
    response = match.func(request, *match.args, **match.kwargs)
    data = getattr(response, "data", None)
    if response.status_code >= 400:
        detail = data if data is not None else response.content[:300].decode("utf-8", "replace")
        raise ToolError(f"{response.status_code} from {path}: {json.dumps(detail, default=str)[:1000]}")
    return data


def bounded(value: Any, max_text: int = MAX_TEXT, max_items: int = MAX_ITEMS) -> Any:
    """`value` with long strings and lists cut, saying how much was left out: an agent's context is small."""
    if isinstance(value, str):
        if len(value) <= max_text:
            return value
        return f"{value[:max_text]}… [{len(value) - max_text} more characters: ask for this item alone]"
    if isinstance(value, dict):
        return {str(k): bounded(v, max_text, max_items) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        kept = [bounded(v, max_text, max_items) for v in value[:max_items]]
        if len(value) > max_items:
            kept.append(f"[{len(value) - max_items} more items: ask for the next page]")
        return kept
    return value


def answer(value: Any) -> dict[str, Any]:
    """A tool's answer: bounded, and cut harder until the whole fits MAX_ANSWER."""
    max_text, max_items = MAX_TEXT, MAX_ITEMS
    shaped = bounded(value, max_text, max_items)
    while len(json.dumps(shaped, default=str)) > MAX_ANSWER and max_text > 50:
        max_text, max_items = max_text // 2, max(5, max_items // 2)
        shaped = bounded(value, max_text, max_items)
    return shaped if isinstance(shaped, dict) else {"result": shaped}
