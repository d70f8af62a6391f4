"""The error answers of the API in its OpenAPI schema, which drf-spectacular leaves out.

Typed clients generated from the schema treat an answer it does not list as a failure of
the client itself; these are the ones every endpoint of ours can give.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from core.roles import READ

ERROR_SCHEMA = {
    "type": "object",
    "description": "`detail` says what was wrong; a form's errors are listed under each field's name instead.",
    "properties": {"detail": {"type": "string"}},
    "additionalProperties": True,
}
UNSAFE_METHODS = {"post", "put", "patch", "delete"}


def document_errors(result: dict[str, Any], generator, request, public) -> dict[str, Any]:
    """A drf-spectacular POSTPROCESSING_HOOK: an operation that needs a login answers 401 without one, and
    one that writes (or reads behind a `read_right`), 403 to a role without the right; one with an object
    in its path, or a page past the last, 404 (others that 404 say so in their view's `documented_errors`);
    one that writes or reads query parameters, 400 for values it refuses; one that writes, 411, 413 and
    415 for a body it will not read (core/limits.py); any, 406 when the client accepts nothing it
    can send, 414 for an address too long, 500 on a bug and 503 while the database or the task broker is
    unreachable (core/errors.py)."""
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    # (the schema names a path's `pk` `id`: SCHEMA_COERCE_PATH_PK)
    views = {(path.replace("{pk}", "{id}"), method.lower()): view.cls for path, _, method, view in generator.endpoints}
    open_to_all = {path for (path, _), view in views.items() if not view.permission_classes}  # /api/token/
    for path, operations in result.get("paths", {}).items():
        for method, operation in operations.items():
            view = views.get((path, method))
            answers = dict(getattr(view, "documented_errors", {}))
            if path not in open_to_all:
                answers["401"] = "Not logged in: no session, token or Basic credentials."
                if method in UNSAFE_METHODS or getattr(view, "read_right", READ) != READ:
                    answers["403"] = "Logged in, but your role may not do this."
            query = {p.get("name") for p in operation.get("parameters", ()) if p.get("in") == "query"}
            if "{" in path or "page" in query:
                answers["404"] = "Nothing found by the ids in the path, or no such page."
            if method in UNSAFE_METHODS or query:
                answers["400"] = "A value in the request was refused."
            if method in UNSAFE_METHODS:
                setting = getattr(view, "max_body_setting", "MAX_BODY_BYTES")
                answers["411"] = "A body sent without Content-Length (chunked): send its length."
                answers["413"] = f"The body is longer than {setting} ({getattr(settings, setting):,} bytes); unread."
                answers["415"] = "The body's media type is not one this operation reads."
            answers["406"] = "No media type the client accepts can be sent."
            answers["414"] = (
                f"The address is longer than MAX_REQUEST_LINE_BYTES ({settings.MAX_REQUEST_LINE_BYTES:,} bytes). "
                "A request line over gunicorn's own limit (4,094 bytes) gets gunicorn's HTML page instead."
            )
            answers["500"] = "The server failed to answer: a bug, logged."
            answers["503"] = (
                "The database or the task broker is unreachable: nothing is lost; ask again after Retry-After "
                "seconds (how long the outage has lasted so far)."
            )
            responses = operation.setdefault("responses", {})
            for code, description in answers.items():
                content = error | ({"text/html": {"schema": {"type": "string"}}} if code == "414" else {})
                responses.setdefault(code, {"description": description, "content": content})
                responses[code].setdefault("content", error)  # a view's own description, without a body shape
    return result
