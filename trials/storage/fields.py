"""Text and JSON fields that take whatever an agent wrote: NUL bytes included."""

from __future__ import annotations

import re

import orjson
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models

_NUL_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")


class NulSafeJSONEncoder(DjangoJSONEncoder):
    """PostgreSQL's jsonb refuses \\u0000, which agent output can contain: store U+FFFD instead.

    The raw bytes of every file keep the original; only the index loses the NUL.
    """

    def encode(self, o):
        try:
            text = orjson.dumps(o).decode()  # an order of magnitude faster than json.dumps
        except TypeError:
            text = super().encode(o)
        return _NUL_ESCAPE.sub(r"\1\\ufffd", text) if "\\u0000" in text else text


def nul_free(text: str) -> str:
    """PostgreSQL text columns refuse NUL characters (see NulSafeJSONEncoder)."""
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


class NulFreeText(models.Field):
    """Text fields whose values lose their NUL characters on the way to the database.

    Every string an import writes comes from an agent or a producer and may hold NUL.
    The column itself is Django's own (see `deconstruct`), so no migration changes.
    """

    def get_prep_value(self, value):
        value = super().get_prep_value(value)
        return nul_free(value) if isinstance(value, str) else value

    def deconstruct(self):
        name, _, args, kwargs = super().deconstruct()
        return name, f"django.db.models.{type(self).__name__}", args, kwargs


class CharField(NulFreeText, models.CharField):
    pass


class TextField(NulFreeText, models.TextField):
    pass


class JSONField(models.JSONField):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("encoder", NulSafeJSONEncoder)
        super().__init__(*args, **kwargs)
