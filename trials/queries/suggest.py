"""What the query box suggests at the cursor: field names, operators, values, `and` / `or`.

The field names are the query schema's (trials.query.TrialSchema), so a field added there is
suggested at once. The text before the cursor is cut into tokens by djangoql's own lexer; the
last, unfinished word (or an open string) is the prefix the suggestions complete.

Values are read without scanning the trials: a catalog table (configurations, tasks, jobs,
datasets: small), a field's choices, or a loose index scan of an indexed column of the big
tables (one index seek per distinct value, so `MAX_SUGGESTIONS` seeks however many trials).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from dataclasses import field as dataclass_field
from typing import Any

from django.db.models import Model, QuerySet
from djangoql.ast import Name
from djangoql.exceptions import DjangoQLError
from djangoql.lexer import DjangoQLLexer
from djangoql.schema import DjangoQLField

from trials.models import ToolCall, Trial
from trials.models.failure_classes import FailureClass
from trials.models.taxonomy import FLAG_LABELS
from trials.query import CALLS, MAX_QUERY_CHARS, Relation, ToolCallCount, TrialSchema

MAX_SUGGESTIONS = 20
TOP = "\U0010ffff"  # above every character: `prefix <= v < prefix + TOP` is a range an index answers
WORD_TOKENS = {"NAME", "AND", "OR", "NOT", "IN", "TRUE", "FALSE", "NONE", "STARTSWITH", "ENDSWITH"}
COMPARISONS = {
    "EQUALS",
    "NOT_EQUALS",
    "CONTAINS",
    "NOT_CONTAINS",
    "STARTSWITH",
    "ENDSWITH",
    "GREATER",
    "GREATER_EQUAL",
    "LESS",
    "LESS_EQUAL",
}
VALUE_TOKENS = {"STRING_VALUE", "INT_VALUE", "FLOAT_VALUE", "TRUE", "FALSE", "NONE"}
DOTTED_END = re.compile(r"(?<![_0-9A-Za-z.])[_A-Za-z][_0-9A-Za-z]*(\.[_A-Za-z][_0-9A-Za-z]*)*\.\Z")
NAME_RE = re.compile(r"[_A-Za-z][_0-9A-Za-z]*\Z")  # what the lexer reads as one part of a name
OPERATORS = {
    "str": ["=", "!=", "~", "!~", "in", "not in", "startswith", "endswith"],
    "number": ["=", "!=", ">", ">=", "<", "<=", "in", "not in"],
    "bool": ["=", "!="],
}
# Trial columns with an index of their own (trials.models.trial.Trial.Meta), scanned for values.
INDEXED_TRIAL_COLUMNS = {"source_format", "failure_category", "exception_type"}


@dataclass
class Item:
    label: str  # what the list shows
    insert: str  # what replaces the prefix
    hint: str = ""  # the field's type, or what the operator means


@dataclass
class Suggestions:
    scope: str  # field, operator, value, logical, or "" (nothing to suggest)
    prefix: str = ""  # the text before the cursor that `insert` replaces (an open string's quote too)
    field: str = ""  # the field whose values these are
    items: list[Item] = dataclass_field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def suggest(before: str) -> Suggestions:
    """The suggestions for a cursor after `before` (the query's text up to the cursor)."""
    before = before[:MAX_QUERY_CHARS]
    tokens, prefix, quoted = _split(before)
    if tokens is None:
        return Suggestions("")
    start = _open_quote(before)
    typed = before[start:] if quoted and start is not None else prefix
    value_of = _value_field(tokens)
    if value_of is not None:
        in_list = tokens[-1].type in ("PAREN_L", "COMMA")
        items = [
            Item(v, _quote(v) + ("" if in_list else " "), value_of)
            for v in values(value_of, prefix)
            if quoted or not prefix or prefix.lower() in v.lower()
        ]
        return Suggestions("value", typed, value_of, items)
    if quoted:
        return Suggestions("")
    last = tokens[-1] if tokens else None
    if last is None or last.type in ("AND", "OR", "NOT", "PAREN_L"):
        return Suggestions("field", typed, items=field_items(prefix))
    if last.type == "NAME":
        kind = _kind(_resolve(last.value))
        ops = [op for op in OPERATORS.get(kind, []) if op.startswith(prefix)] if kind else []
        return Suggestions("operator", typed, last.value, [Item(op, op + " ", kind) for op in ops])
    if last.type in VALUE_TOKENS or last.type == "PAREN_R":
        words = [w for w in ("and", "or") if w.startswith(prefix)]
        return Suggestions("logical", typed, items=[Item(w, w + " ") for w in words])
    return Suggestions("")


def _split(before: str) -> tuple[list[Any] | None, str, bool]:
    """The finished tokens before the cursor, the unfinished word or string at it, and whether that is a
    string (an open quote); None for the tokens when the text cannot be read."""
    start = _open_quote(before)
    text = before[:start] if start is not None else before
    dotted = DOTTED_END.search(text) if start is None else None
    tokens = _lex(text[: dotted.start()] if dotted else text)
    if tokens is None:
        return None, "", False
    if dotted:  # `job.`: a name and its dot (the lexer reads no lone dot)
        return tokens, dotted.group(0), False
    if start is not None:
        raw = before[start + 1 :]
        try:
            prefix = json.loads(f'"{raw}"')
        except ValueError:
            prefix = raw
        return tokens, prefix, True
    if tokens and tokens[-1].type in WORD_TOKENS and tokens[-1].lexpos + len(tokens[-1].value) == len(text):
        return tokens[:-1], tokens[-1].value, False
    if tokens and tokens[-1].type in ("INT_VALUE", "FLOAT_VALUE", "STRING_VALUE") and not text[-1:].isspace():
        return None, "", False  # in the middle of a number, or right after a closing quote
    return tokens, "", False


def _open_quote(text: str) -> int | None:
    """Where a string left open at the end of `text` starts (its quote), if one is."""
    at, opened = 0, None
    while at < len(text):
        char = text[at]
        if opened is None and char in "\"'":
            opened = at
        elif opened is not None and char == "\\":
            at += 1
        elif opened is not None and char == text[opened]:
            opened = None
        at += 1
    return opened


def _lex(text: str) -> list[Any] | None:
    lexer = DjangoQLLexer()
    lexer.input(text)
    try:
        return list(lexer)
    except DjangoQLError:
        return None


def _value_field(tokens: list[Any]) -> str | None:
    """The field a value typed now is compared with: after `field <op>`, or in `field [not] in (…,`."""
    if len(tokens) >= 2 and tokens[-1].type in COMPARISONS:
        name = tokens[-3] if tokens[-2].type == "NOT" and len(tokens) >= 3 else tokens[-2]
        return name.value if name.type == "NAME" else None
    at = len(tokens) - 1
    if at < 0 or tokens[at].type not in ("PAREN_L", "COMMA"):
        return None
    while at >= 0 and tokens[at].type in VALUE_TOKENS | {"COMMA"}:  # back over the list's values to its `(`
        at -= 1
    if at < 2 or tokens[at].type != "PAREN_L" or tokens[at - 1].type != "IN":
        return None
    name = tokens[at - 3] if tokens[at - 2].type == "NOT" and at >= 3 else tokens[at - 2]
    return name.value if name.type == "NAME" else None


def _quote(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # the lexer's strings are JSON's


def _resolve(name: str) -> DjangoQLField | None:
    try:
        return TrialSchema(Trial).resolve_name(Name(parts=name.split(".")))
    except DjangoQLError:
        return None


def _kind(found: DjangoQLField | None) -> str:
    if found is None or isinstance(found, Relation):
        return ""
    if found.type in ("int", "float", "datetime", "date"):
        return "number"
    return found.type if found.type in OPERATORS else ""


def field_items(prefix: str) -> list[Item]:
    """The schema's field names starting with `prefix`; after `calls.`, the tools' names."""
    if prefix.startswith(f"{CALLS}."):
        tool = prefix[len(CALLS) + 1 :]
        names = [t for t in loose_scan(ToolCall.objects.all(), "function_name", tool) if NAME_RE.match(t)]
        return [Item(f"{CALLS}.{t}", f"{CALLS}.{t} ", "number of calls") for t in names]
    found = [item for item in schema_fields() if item.label.startswith(prefix)]
    return found[:MAX_SUGGESTIONS] if prefix else [i for i in found if "." not in i.label][:MAX_SUGGESTIONS]


def schema_fields() -> list[Item]:
    """Every field of the query schema: the trial's, a relation's (`job.name`), and `calls.`."""
    schema = TrialSchema(Trial)
    items = []
    for name, found in schema.models[schema.model_label(Trial)].items():
        if isinstance(found, Relation):
            items.append(Item(name, name + " ", f"{found.default} of the {name}"))
            related = schema.models[schema.model_label(found.related_model)]
            items += [Item(f"{name}.{sub}", f"{name}.{sub} ", _kind(f) or f.type) for sub, f in related.items()]
        else:
            items.append(Item(name, name + " ", _kind(found) or found.type))
    items.append(Item(f"{CALLS}.", f"{CALLS}.", "calls of one tool: calls.bash"))
    return items


def values(name: str, prefix: str) -> list[str]:
    """Up to MAX_SUGGESTIONS values of the field `name` holding `prefix` (starting with it, for the
    big tables' columns), from catalogs, choices and indexes only."""
    found = _resolve(name)
    if found is None or isinstance(found, ToolCallCount) or _kind(found) == "number":
        return []
    if found.type == "bool":
        return [v for v in ("True", "False") if v.lower().startswith(prefix.lower())]
    special = {
        "class": lambda: _matching([c.value for c in FailureClass], prefix),
        "flag": lambda: _matching(list(FLAG_LABELS), prefix),
        "cause": lambda: sorted({*_trial_column("failure_category", prefix), *_trial_column("exception_type", prefix)}),
    }
    if name in special:
        return special[name]()[:MAX_SUGGESTIONS]
    parts = name.split(".")
    lookup = found.get_lookup_name()
    path = f"{parts[0]}__{lookup}" if len(parts) == 2 else lookup
    model, column = _walk(Trial, path)
    if model is None:
        return []
    choices = model._meta.get_field(column).choices
    if choices:
        return _matching([str(value) for value, _ in choices if value], prefix)
    if model is Trial:
        return _trial_column(column, prefix)
    return catalog_values(model, column, prefix)


def _walk(model: type[Model], path: str) -> tuple[Any, str]:
    """The model and column a lookup path (`configuration__model_name`) ends at."""
    *relations, column = path.split("__")
    for relation in relations:
        model = model._meta.get_field(relation).related_model  # type: ignore[assignment]
        if model is None:
            return None, ""
    try:
        model._meta.get_field(column)
    except Exception:
        return None, ""
    return model, column


def _matching(choices: list[str], prefix: str) -> list[str]:
    return [c for c in choices if prefix.lower() in c.lower()][:MAX_SUGGESTIONS]


def catalog_values(model: type[Model], column: str, prefix: str) -> list[str]:
    """A small table's distinct values holding `prefix`, those starting with it first."""
    rows = model._default_manager.exclude(**{f"{column}__isnull": True}).exclude(**{column: ""})
    seen: list[str] = []
    for lookup in ("istartswith", "icontains"):
        more = rows.filter(**{f"{column}__{lookup}": prefix}) if prefix else rows
        for value in more.order_by(column).values_list(column, flat=True).distinct()[: MAX_SUGGESTIONS * 2]:
            if value not in seen:
                seen.append(value)
        if len(seen) >= MAX_SUGGESTIONS or not prefix:
            break
    return seen[:MAX_SUGGESTIONS]


def _trial_column(column: str, prefix: str) -> list[str]:
    if column not in INDEXED_TRIAL_COLUMNS:
        return []  # free text (names, messages): no index to read suggestions from
    return _cased(Trial.objects.all(), column, prefix)


def _cased(rows: QuerySet, column: str, prefix: str) -> list[str]:
    """An index scan (case-sensitive) for the prefix as typed, then in lower case, then capitalised,
    until MAX_SUGGESTIONS values are found."""
    found: set[str] = set()
    for variant in dict.fromkeys([prefix, prefix.lower(), prefix[:1].upper() + prefix[1:]]):
        found |= set(loose_scan(rows, column, variant, limit=MAX_SUGGESTIONS - len(found)))
        if len(found) >= MAX_SUGGESTIONS:
            break
    return sorted(found)


def loose_scan(rows: QuerySet, column: str, prefix: str, limit: int = MAX_SUGGESTIONS) -> list[str]:
    """The first `limit` distinct non-empty values of an indexed column starting with `prefix`:
    each the smallest value above the last, one index seek apiece (no scan of the repeats).

    One lower bound a query: with two (`> ''` and `> last`) SQLite seeks by one and filters by the
    other, reading every repeat of the last value.
    """
    rows = rows.order_by(column)
    upper = {f"{column}__lt": prefix + TOP, f"{column}__startswith": prefix} if prefix else {}
    found: list[str] = []
    while len(found) < limit:
        if found:
            lower = {f"{column}__gt": found[-1]}
        else:
            lower = {f"{column}__gte": prefix} if prefix else {f"{column}__gt": ""}
        value = rows.filter(**lower, **upper).values_list(column, flat=True).first()
        if value is None:
            break
        found.append(value)
    return found
