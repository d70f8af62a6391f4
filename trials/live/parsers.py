"""The live API's body parsers: JSON through orjson, and JSON lines kept as bytes, both read capped."""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

import orjson
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser

from core import limits


def _capped_body(stream: IO[bytes], parser_context: Mapping[str, Any] | None) -> bytes:
    """The body, read no further than the view's limit (the middleware checked Content-Length already)."""
    return limits.read_capped(stream, limits.body_limit((parser_context or {})["view"]))


class JSONLinesParser(BaseParser):
    """A body of runtime events, one JSON object a line (kept as bytes: the view names bad lines)."""

    media_type = "application/x-ndjson"

    def parse(  # type: ignore[override]  # the raw body: TrialEvents reads its lines itself
        self, stream: IO[bytes], media_type: str | None = None, parser_context: Mapping[str, Any] | None = None
    ) -> bytes:
        return _capped_body(stream, parser_context)


class FastJSONParser(BaseParser):
    """JSON through orjson: a POST of thousands of events spends its time parsing them."""

    media_type = "application/json"

    def parse(
        self, stream: IO[bytes], media_type: str | None = None, parser_context: Mapping[str, Any] | None = None
    ) -> Any:
        try:
            return orjson.loads(_capped_body(stream, parser_context))
        except orjson.JSONDecodeError as exc:
            raise ParseError(f"the body is not JSON: {exc}") from exc


class JSONLinesAlias(JSONLinesParser):
    media_type = "application/jsonl"
