"""Ids as URLs and forms write them."""

from __future__ import annotations

from typing import Any


def parse_pk(value: Any) -> int | None:
    """A row id as a URL or a form writes it: ASCII digits that fit a 64-bit column; else None.
    (`str.isdigit` also takes "²", which `int` refuses, and any length.)"""
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 18:
        return int(value)
    return None
