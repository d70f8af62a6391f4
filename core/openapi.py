"""The error answers of the API in its OpenAPI schema, which drf-spectacular leaves out.

Typed clients generated from the schema treat an answer it does not list as a failure of
the client itself; these are the ones every endpoint of ours can give.
"""

from __future__ import annotations

from typing import Any

ERROR_SCHEMA = {
    "type": "object",
    "description": "`detail` says what was wrong; a form's errors are listed under each field's name instead.",
    "properties": {"detail": {"type": "string"}},
    "additionalProperties": True,
}
UNSAFE_METHODS = {"post", "put", "patch", "delete"}


def document_errors(result: dict[str, Any], generator, request, public) -> dict[str, Any]:
    """A drf-spectacular POSTPROCESSING_HOOK: an operation that needs a login answers 401 without one, and
    one that writes, 403 to a role without the right; one with an object in its path, or a page past the
    last, 404; one that writes or reads query parameters, 400 for values it refuses; one that writes, 415
    for a body it cannot read; any, 406 when the client accepts nothing it can send, 414 for a request
    line too long, 500 on a bug and 503 while the database or the task broker is unreachable
    (core/errors.py)."""
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    open_to_all = {path for path, _, _, view in generator.endpoints if not view.cls.permission_classes}  # /api/token/
    for path, operations in result.get("paths", {}).items():
        for method, operation in operations.items():
            answers = {}
            if path not in open_to_all:
                answers["401"] = "Not logged in: no session, token or Basic credentials."
                if method in UNSAFE_METHODS:
                    answers["403"] = "Logged in, but your role may not do this."
            query = {p.get("name") for p in operation.get("parameters", ()) if p.get("in") == "query"}
            if "{" in path or "page" in query:
                answers["404"] = "Nothing found by the ids in the path, or no such page."
            if method in UNSAFE_METHODS or query:
                answers["400"] = "A value in the request was refused."
            if method in UNSAFE_METHODS:
                answers["415"] = "The body's media type is not one this operation reads."
            answers["406"] = "No media type the client accepts can be sent."
            answers["414"] = "The request line is longer than the server reads (4,094 bytes behind gunicorn)."
            answers["500"] = "The server failed to answer: a bug, logged."
            answers["503"] = (
                "The database or the task broker is unreachable: nothing is lost; ask again after Retry-After seconds."
            )
            for code, description in answers.items():
                operation.setdefault("responses", {}).setdefault(code, {"description": description, "content": error})
    return result
