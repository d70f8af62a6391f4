"""Plain inserts (and one update) for the biggest tables (steps, tool calls, observations).

Building one model instance per row costs about half a millisecond in the ORM, which
dominated imports of long trajectories (bench/import_bench.py). Values are prepared
here the way Django's own fields would prepare them for the database, then go in by
executemany on SQLite and by COPY on PostgreSQL.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from itertools import islice
from operator import itemgetter
from typing import Any

from django.db import connection, models

from trials.storage.fields import NulFreeText, nul_free


def insert_rows(model: type[models.Model], rows: list[dict[str, Any]]) -> None:
    """INSERT rows given as {attname: value}; every row has the same keys. A column left out gets its
    field's default, as the ORM would give it (a field added later breaks no caller)."""
    if not rows:
        return
    by_attname = {f.attname: f for f in model._meta.concrete_fields}
    names = list(rows[0])
    defaulted = [f for f in model._meta.concrete_fields if f.attname not in rows[0] and not f.primary_key]
    fields = [by_attname[name] for name in names] + defaulted
    quote = connection.ops.quote_name
    target = "{} ({})".format(quote(model._meta.db_table), ", ".join(quote(f.column) for f in fields))
    row_values = itemgetter(*names)
    values = list(map(row_values, rows)) if len(names) > 1 else [(row[names[0]],) for row in rows]
    if defaulted:
        defaults = tuple(f.get_default() for f in defaulted)
        values = [(*row, *defaults) for row in values]
    converting = [(i, convert) for i, convert in enumerate(map(_converter, fields)) if convert is not None]
    if converting:  # only text, JSON and datetime columns need preparing; the rest go as they are
        prepared = []
        for row in values:
            row = list(row)
            for i, convert in converting:
                row[i] = convert(row[i])
            prepared.append(row)
        values = prepared
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # executemany is a round trip per row on PostgreSQL; COPY streams them all at once.
            with connection.wrap_database_errors, cursor.cursor.copy(f"COPY {target} FROM STDIN") as copy:
                for row in values:  # (wrap_database_errors: Django's exceptions, as from any query)
                    copy.write_row(row)
        else:
            cursor.executemany(f"INSERT INTO {target} VALUES ({', '.join(['%s'] * len(fields))})", values)


def create_in_batches(model: type[models.Model], objs: Iterable[models.Model], batch: int = 2000) -> None:
    """`bulk_create` a batch at a time: a generator's rows (a long sample's approvals) are never held whole."""
    rows = iter(objs)
    while chunk := list(islice(rows, batch)):
        model._default_manager.bulk_create(chunk)


def _converter(field: models.Field) -> Callable[[Any], Any] | None:
    if isinstance(field, NulFreeText):  # what its get_prep_value would do

        def to_text(value: Any) -> Any:
            return nul_free(value) if isinstance(value, str) else value

        return to_text
    if isinstance(field, models.JSONField):
        # (None: json.dumps' own, as Django's get_prep_value); one encoder for every row of the insert
        encode = (field.encoder or json.JSONEncoder)().encode

        def to_json(value: Any) -> Any:
            return None if value is None else encode(value)

        return to_json
    if isinstance(field, models.DateTimeField):
        return connection.ops.adapt_datetimefield_value
    return None


def set_integers(model: type[models.Model], column: str, values: dict[int, int | None], batch: int = 2000) -> None:
    """Set one integer column to a value per row (by pk) in an UPDATE ... FROM a list of values a batch.

    Django's bulk_update writes a CASE naming every row, which took 14 s for a live trial's 20,000
    steps on SQLite; a join on the values is one pass (SQLite since 3.33 and PostgreSQL alike)."""
    quote = connection.ops.quote_name
    by_attname = {f.attname: f for f in model._meta.concrete_fields}
    table, target = quote(model._meta.db_table), quote(by_attname[column].column)
    pk = quote(model._meta.pk.column)
    items = list(values.items())
    with connection.cursor() as cursor:
        for start in range(0, len(items), batch):
            chunk = items[start : start + batch]
            rows = ", ".join(["(CAST(%s AS BIGINT), CAST(%s AS BIGINT))"] * len(chunk))
            sql = (
                f"WITH v(pk, value) AS (VALUES {rows}) "
                f"UPDATE {table} SET {target} = v.value FROM v WHERE {table}.{pk} = v.pk"
            )
            cursor.execute(sql, [x for pair in chunk for x in pair])
