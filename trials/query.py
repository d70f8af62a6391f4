"""The trials query language: `?q=` of the trial list, its API and the MCP tools.

djangoql's lexer, grammar and schema, with three additions: `not` before an expression, `and` binding
tighter than `or`, and the fields a reviewer asks about rather than the columns (`class` is a
triager's override or the rules' class, `cause` any of category, exception type and message,
`calls.bash` the number of the trial's calls of the tool `bash`).

    status = "failed" and model ~ "opus" and calls.bash > 50 and cause ~ "timeout"
    not (class in ("infrastructure", "task_quality")) or reward >= 0.5

A bad query raises `QueryError`, which names the line and column and what was expected there.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import ply.yacc as yacc
from django.db.models import Case, Count, F, Q, Value, When
from django.db.models.functions import Coalesce
from django.db.models.lookups import (
    Exact,
    GreaterThan,
    GreaterThanOrEqual,
    IContains,
    IEndsWith,
    In,
    IStartsWith,
    LessThan,
    LessThanOrEqual,
)
from djangoql.ast import Const, Expression, List, Logical, Name, Node
from djangoql.exceptions import DjangoQLError, DjangoQLSchemaError
from djangoql.parser import DjangoQLParser
from djangoql.schema import (
    BoolField,
    DateTimeField,
    DjangoQLField,
    DjangoQLSchema,
    FloatField,
    IntField,
    RelationField,
    StrField,
)

from trials.models import Configuration, Dataset, Job, Task, ToolCall, Trial

MAX_QUERY_CHARS = 2000
MAX_COMPARISONS = 64  # each one a clause of the SQL: a query stays a query, not a program
INT_LIMIT = 2**63  # what a database integer holds

# What a parse error calls each token: a field name, a value, a word as written, a symbol quoted.
TOKEN_SYMBOLS = (
    "PAREN_L ( PAREN_R ) COMMA , EQUALS = NOT_EQUALS != GREATER > GREATER_EQUAL >= LESS < LESS_EQUAL <= "
    "CONTAINS ~ NOT_CONTAINS !~"
).split()
TOKEN_NAMES = {
    "NAME": "a field name",
    "STRING_VALUE": "a string",
    "INT_VALUE": "a number",
    "FLOAT_VALUE": "a number",
    "$end": "the end of the query",
    **{word.upper(): word for word in ("and", "or", "not", "in", "startswith", "endswith", "True", "False", "None")},
    **{name: f"'{symbol}'" for name, symbol in zip(TOKEN_SYMBOLS[::2], TOKEN_SYMBOLS[1::2], strict=True)},
}


@dataclass
class QueryError(Exception):
    """A query that cannot run: where (1-based line and column, when known) and why."""

    message: str
    line: int | None = None
    column: int | None = None
    expected: list[str] = field(default_factory=list)
    offset: int | None = None  # where in the text, when line and column are not yet known

    def __str__(self) -> str:
        where = f"line {self.line}, column {self.column}: " if self.line and self.column else ""
        return where + self.message


class Not(Node):
    def __init__(self, operand: Node) -> None:
        self.operand = operand


class Parser(DjangoQLParser):
    """djangoql's grammar, `not <expression>` added and the usual precedence (not, then and, then or)."""

    precedence = (("left", "OR"), ("left", "AND"), ("right", "NOT"))

    def __init__(self) -> None:
        super().__init__(errorlog=yacc.NullLogger())  # (its `logical` rule is left unused: a warning only)

    def p_expression_logical(self, p: Any) -> None:
        """
        expression : expression AND expression
                   | expression OR expression
        """
        p[0] = Expression(left=p[1], operator=Logical(operator=p[2]), right=p[3])

    def p_name(self, p: Any) -> None:
        """
        name : NAME
        """
        p[0] = Name(parts=p[1].split("."))
        p[0].offset = p.lexpos(1)  # where a schema error about it points

    def p_expression_not(self, p: Any) -> None:
        """
        expression : NOT expression
        """
        p[0] = Not(p[2])

    def p_error(self, token: Any) -> None:
        state = self.yacc.statestack[-1] if self.yacc.statestack else 0
        expected = sorted({TOKEN_NAMES.get(name, name) for name in self.yacc.action.get(state, {})})
        wanted = f"expected {', '.join(expected)}" if expected else "unexpected input"
        if token is None:  # at the end: the column after the last character
            text = self.default_lexer.text
            line, column = text.count("\n") + 1, len(text) - max(text.rfind("\n"), -1)
            raise QueryError(f"{wanted}; the query ended", line=line, column=column, expected=expected)
        fragment = str(token.value)
        fragment = fragment[:17] + "..." if len(fragment) > 20 else fragment
        column = self.default_lexer.find_column(token)
        raise QueryError(f"{wanted}; found {fragment!r}", line=token.lineno, column=column, expected=expected)


_parsers = threading.local()  # ply's parser and lexer keep state while they parse: one per thread


def parser() -> Parser:
    if not hasattr(_parsers, "parser"):
        _parsers.parser = Parser()
    return _parsers.parser


class Named:
    """A field whose database lookup is not its name (`model` is `configuration__model_name`)."""

    def __init__(self, name: str, lookup: str = "", **kwargs: Any) -> None:
        super().__init__(name=name, **kwargs)  # type: ignore[call-arg]
        self.lookup = lookup or name

    def get_lookup_name(self) -> str:
        return self.lookup


class Str(Named, StrField):
    def get_options(self, search: str) -> list[str]:
        choices = [str(c[1]) for c in self._field_choices()]
        return [c for c in choices if search.lower() in c.lower()]


class Int(Named, IntField):
    pass


class Float(Named, FloatField):
    pass


class Bool(Named, BoolField):
    pass


class Time(Named, DateTimeField):
    pass


LOOKUPS = {
    "": Exact,
    "__gt": GreaterThan,
    "__gte": GreaterThanOrEqual,
    "__lt": LessThan,
    "__lte": LessThanOrEqual,
    "__icontains": IContains,
    "__in": In,
    "__istartswith": IStartsWith,
    "__iendswith": IEndsWith,
}


class Computed:
    """A field that is an expression over the trial's columns (its `expression()`), not a column."""

    def expression(self) -> Any:
        raise NotImplementedError

    def get_lookup(self, path: list[str], operator: str, value: Any) -> Q:
        suffix, invert = self.get_operator(operator)  # type: ignore[attr-defined]
        q = Q(LOOKUPS[suffix](self.expression(), value))
        return ~q if invert else q


class FailureClassField(Computed, StrField):
    """The trial's class: a triager's override, else the rules' (Trial.effective_failure_class)."""

    def expression(self) -> Any:
        return Case(When(failure_class_override="", then=F("failure_class")), default=F("failure_class_override"))


class TokensField(Computed, IntField):
    """Input and output tokens (a missing count is none)."""

    def expression(self) -> Any:
        return Coalesce(F("input_tokens"), Value(0)) + Coalesce(F("output_tokens"), Value(0))


class AnyOf(StrField):
    """True when any of the columns matches (for `!=`, `!~`, `not in`: when none does)."""

    def __init__(self, name: str, columns: tuple[str, ...]) -> None:
        super().__init__(name=name)
        self.columns = columns

    def get_lookup(self, path: list[str], operator: str, value: Any) -> Q:
        suffix, invert = self.get_operator(operator)
        q = Q()
        for column in self.columns:
            q |= Q(**{f"{column}{suffix}": value})
        return ~q if invert else q


class FlagField(StrField):
    """A safety flag of the trial (`Trial.safety_flags`, a JSON list): `=` a whole name, `~` part of one."""

    def get_lookup(self, path: list[str], operator: str, value: Any) -> Q:
        suffix, invert = self.get_operator(operator)
        wanted = value if isinstance(value, list) else [value]
        q = Q()
        for one in wanted:
            if suffix == "__icontains":
                q |= Q(safety_flags__icontains=one)
            elif suffix in ("", "__in"):
                q |= Q(safety_flags__icontains=f'"{one}"')
            else:  # startswith / endswith / comparisons: the flag's text within its quotes
                q |= Q(safety_flags__iregex=_flag_regex(suffix, one))
        return ~q if invert else q


def _flag_regex(suffix: str, value: str) -> str:
    escaped = re.escape(value)
    if suffix == "__istartswith":
        return f'"{escaped}[^"]*"'
    if suffix == "__iendswith":
        return f'"[^"]*{escaped}"'
    raise DjangoQLSchemaError("flags are names: compare them with =, !=, ~, !~, in, startswith or endswith")


ZERO_MATCHES = {  # does a count of 0 meet the comparison?
    "": lambda v: v == 0,
    "__gt": lambda v: 0 > v,
    "__gte": lambda v: 0 >= v,
    "__lt": lambda v: 0 < v,
    "__lte": lambda v: 0 <= v,
    "__in": lambda v: 0 in v,
}


class ToolCallCount(IntField):
    """How many times the trial called one tool (`calls.bash`): 0 when it never did."""

    def __init__(self, tool: str) -> None:
        super().__init__(name=f"calls.{tool}")
        self.tool = tool

    def get_lookup(self, path: list[str], operator: str, value: Any) -> Q:
        suffix, invert = self.get_operator(operator)
        calls = ToolCall.objects.filter(function_name=self.tool).order_by()
        counted = calls.values("trial_id").annotate(n=Count("pk")).filter(**{f"n{suffix}": value})
        q = Q(pk__in=counted.values("trial_id"))
        zero_matches = ZERO_MATCHES[suffix](value)
        if zero_matches:
            q |= ~Q(pk__in=calls.values("trial_id"))
        return ~q if invert else q


class Relation(RelationField):
    """A related row; its name alone stands for its `default` field (`task = "fix-git"` is `task.name`)."""

    def __init__(self, model: type, name: str, related_model: type, default: str) -> None:
        super().__init__(model=model, name=name, related_model=related_model, nullable=True)
        self.default = default


CALLS = "calls"


class TrialSchema(DjangoQLSchema):
    include = (Trial, Job, Dataset, Task, Configuration)

    def get_fields(self, model: type) -> list[DjangoQLField]:
        if model is Trial:
            return trial_fields()
        return RELATED_FIELDS.get(model, [])

    def resolve_name(self, name: Name) -> DjangoQLField | None:
        parts = name.parts
        if parts[0] == CALLS:
            if len(parts) != 2:
                raise DjangoQLSchemaError(f"{CALLS}.<tool name>: the number of calls of one tool, as calls.bash")
            return ToolCallCount(parts[1])
        found = super().resolve_name(name)
        if found is None and len(parts) == 1:  # a relation named alone: its default field
            relation = self.models[self.model_label(Trial)][parts[0]]
            if isinstance(relation, Relation):
                return Str(parts[0], f"{parts[0]}__{relation.default}", nullable=True)
        return found

    def validate(self, node: Node) -> None:
        if isinstance(node, Not):
            self.validate(node.operand)
        elif isinstance(node, Expression) and isinstance(node.operator, Logical):
            super().validate(node)
        else:
            try:
                super().validate(node)
            except DjangoQLSchemaError as error:
                raise QueryError(str(error), offset=getattr(node.left, "offset", None)) from None


def trial_fields() -> list[DjangoQLField]:
    return [
        Int("id", "pk"),
        Str("name"),
        Str("status", model=Trial),
        Float("reward", nullable=True),
        Int("attempt", nullable=True),
        Str("format", "source_format"),
        Str("category", "failure_category"),
        Str("exception", "exception_type"),
        Str("message", "exception_message"),
        AnyOf("cause", ("failure_category", "exception_type", "exception_message")),
        FailureClassField(name="class"),
        Bool("flagged", "is_flagged"),
        FlagField(name="flag"),
        Bool("complete", "is_complete"),
        Int("steps", "step_count"),
        Int("tool_calls", "tool_call_count"),
        TokensField(name="tokens"),
        Int("input_tokens", nullable=True),
        Int("output_tokens", nullable=True),
        Int("cached_tokens", nullable=True),
        Float("cost", "cost_usd", nullable=True),
        Float("duration", "duration_sec", nullable=True),
        Time("started", "started_at", nullable=True),
        Time("finished", "finished_at", nullable=True),
        Str("failing_test"),
        Int("cluster", "cluster_id", nullable=True),
        Str("agent", "configuration__agent_name", nullable=True),
        Str("model", "configuration__model_name", nullable=True),
        Str("role", "configuration__role", nullable=True),
        Relation(Trial, "job", Job, "name"),
        Relation(Trial, "dataset", Dataset, "name"),
        Relation(Trial, "task", Task, "name"),
        Relation(Trial, "configuration", Configuration, "key"),
    ]


RELATED_FIELDS: dict[type, list[DjangoQLField]] = {
    Job: [Str("name"), Str("key"), Str("format", "source_format"), Time("started", "started_at", nullable=True)],
    Dataset: [Str("name"), Str("version")],
    Task: [Str("name")],
    Configuration: [
        Str("key"),
        Str("role", model=Configuration),
        Str("agent", "agent_name"),
        Str("agent_version"),
        Str("model", "model_name"),
    ],
}


@dataclass
class Query:
    """A parsed, checked query: `filter(queryset)` applies it."""

    text: str
    tree: Node

    def filter(self, queryset: Any) -> Any:
        return queryset.filter(build(self.tree, TrialSchema(Trial)))


def build(node: Node, schema: TrialSchema) -> Q:
    if isinstance(node, Not):
        return ~build(node.operand, schema)
    assert isinstance(node, Expression)
    if isinstance(node.operator, Logical):
        left, right = build(node.left, schema), build(node.right, schema)
        return left | right if node.operator.operator == "or" else left & right
    found = schema.resolve_name(node.left)
    if found is None:  # a relation compared to None: the trial has none
        return Q(**{f"{'__'.join(node.left.parts)}__isnull": node.operator.operator == "="})
    return found.get_lookup(path=node.left.parts[:-1], operator=node.operator.operator, value=node.right.value)


def parse(text: str) -> Query:
    """The query `text` checked against the schema; QueryError when it cannot run."""
    if len(text) > MAX_QUERY_CHARS:
        raise QueryError(f"a query of at most {MAX_QUERY_CHARS} characters (this one has {len(text)})")
    try:
        tree = parser().parse(text)
    except DjangoQLError as error:  # the lexer's: an illegal character
        raise QueryError(str(error).split(": ", 1)[-1], line=error.line, column=error.column) from None
    try:
        comparisons = check_constants(tree)
        if comparisons > MAX_COMPARISONS:
            raise QueryError(f"at most {MAX_COMPARISONS} comparisons in a query (this one has {comparisons})")
        TrialSchema(Trial).validate(tree)
    except QueryError as error:
        if error.offset is not None:
            before = text[: error.offset]
            error.line, error.column = before.count("\n") + 1, error.offset - max(before.rfind("\n"), -1)
        raise
    return Query(text, tree)


def check_constants(node: Node) -> int:
    """Refuse values no database column holds (a NUL, a lone surrogate, a 30-digit integer, 1e999);
    the number of comparisons."""
    if isinstance(node, Not):
        return check_constants(node.operand)
    assert isinstance(node, Expression)
    if isinstance(node.operator, Logical):
        return check_constants(node.left) + check_constants(node.right)
    at = getattr(node.left, "offset", None)
    consts = node.right.items if isinstance(node.right, List) else [node.right]
    for const in consts:
        assert isinstance(const, Const)
        value = const.value
        if isinstance(value, str) and (
            "\x00" in value or any("\ud800" <= c <= "\udfff" for c in value) or len(value) > 500
        ):
            raise QueryError(
                f"{node.left.value}: a string without NUL or lone surrogates, of at most 500 characters", offset=at
            )
        if isinstance(value, int) and not isinstance(value, bool) and not -INT_LIMIT < value < INT_LIMIT:
            raise QueryError(f"{node.left.value}: a number between -2^63 and 2^63", offset=at)
        if isinstance(value, Decimal):
            if not value.is_finite() or abs(value) > Decimal("1e300"):
                raise QueryError(f"{node.left.value}: a number no larger than 1e300", offset=at)
            const.value = float(value)
    return 1
