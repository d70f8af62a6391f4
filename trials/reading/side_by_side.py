"""Two trials of one task side by side: their main trajectories aligned a window at a time.

Reads only the steps' stored hashes (trials.ingest.signatures): the first divergence is a
search on the prefix hashes (log32 n queries), and a window aligns `WINDOW` steps of each
side, so the cost is about the same at 50 and at 50,000 steps (bench/viewer_bench.py).

Equal signatures are `same`, equal keys in the gaps `changed`, the rest `only_left` / `only_right`.
The page opens a few steps above the first divergence and folds runs of identical pairs; it is
reached from the trial header's "compare with…" and from a comparison's per-task matrix. Keys
(static/js/side_by_side.js): j / k every pair, n / N the pairs that differ, o unfolds, Enter opens.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass

import orjson
from django.db.models import QuerySet
from django.db.models.functions import Substr

from trials.models import Step, Task, ToolCall, Trajectory, Trial, step_url
from trials.reading.align import Pair, Settled, Signed, align_window, first_divergence
from trials.reading.steps import main_trajectory
from trials.reading.text import scrub

WINDOW = 50  # steps of each side one answer aligns (as many as a window of the trial page)
PROBES = 32  # prefix hashes a round of the search reads (four rounds at 50,000; 256 read slower than 4 x 32)
MAX_WINDOW = 1000
BEFORE_DIVERGENCE = 3  # identical steps the page shows above the first divergence
COMPARE_WITH = 30  # trials a trial page offers to compare with
LINE = 200  # characters of a step's tool calls or message on its row


class NotComparable(Exception):
    """Two trials the side-by-side view does not align (the message says why)."""


@dataclass
class Sides:
    left: Trial
    right: Trial
    left_steps: Trajectory
    right_steps: Trajectory
    note: str = ""  # two versions of one dataset: "not like-for-like: <name> <v1> vs <v2>"


def sides(left: Trial, right: Trial) -> Sides:
    """The main trajectory of each trial; trials of different tasks are refused (a task is its dataset and
    its name; one name in two versions of a dataset pairs, as comparisons pair it, with a note)."""
    if left.task is None or right.task is None or not left.task.pairs_with(right.task):
        raise NotComparable(
            f"trials {left.pk} and {right.pk} are not of the same task (its dataset and name):"
            " only attempts of one task align"
        )
    found = []
    for trial in (left, right):
        trajectory = main_trajectory(trial, list(trial.trajectories.order_by("position", "pk")))
        if trajectory is None:
            raise NotComparable(f"trial {trial.pk} has no trajectory")
        found.append(trajectory)
    return Sides(left, right, found[0], found[1], left.task.version_differs(right.task))


def common_prefix(left: Trajectory, right: Trajectory) -> int:
    """How many steps from the start both trajectories have identical (by their prefix hashes).

    A search in rounds: each round reads the prefix hashes at up to `PROBES` evenly spaced
    steps of both sides in one query and keeps the stretch where they stop agreeing, so
    50,000 steps take four queries.
    """
    shorter = min(left.step_count, right.step_count)
    if left.pk == right.pk:
        return shorter
    low, high = 0, shorter  # the first `low` steps are identical; more than `high` are not
    # (no ordering: the model's joins the trajectory and trial tables)
    both = Step.objects.order_by().filter(trajectory_id__in=[left.pk, right.pk])
    while low < high:
        lengths = sorted({low + (high - low) * k // PROBES for k in range(1, PROBES + 1)} - {low})
        rows = both.filter(index__in=[n - 1 for n in lengths]).values_list("trajectory_id", "index", "chain")
        chains = {(trajectory_id, index + 1): chain for trajectory_id, index, chain in rows}
        agreed = [
            n for n in lengths if chains.get((left.pk, n)) and chains.get((left.pk, n)) == chains.get((right.pk, n))
        ]
        # prefixes agree up to some length and never after: the last agreeing probe and the next one bound it
        low = max(agreed, default=low)
        high = min((n - 1 for n in lengths if n > low), default=high)
    return low


def _signed(trajectory: Trajectory, start: int, size: int) -> list[Signed[int]]:
    """Steps [start, start + size) as the aligner takes them, each named by its number (from 1)."""
    rows = (
        Step.objects.filter(trajectory=trajectory, index__gte=start, index__lt=start + size)
        .order_by("index")
        .values_list("index", "align_key", "signature")
    )
    return [Signed(index + 1, key, signature) for index, key, signature in rows]


def align_from(s: Sides, left_start: int, right_start: int, size: int = WINDOW) -> Settled[int]:
    """The pairs from step index `left_start` / `right_start` (0-based) on, one window of each side."""
    return align_window(
        _signed(s.left_steps, left_start, size),
        _signed(s.right_steps, right_start, size),
        left_start + size >= s.left_steps.step_count,
        right_start + size >= s.right_steps.step_count,
    )


def divergence(s: Sides, prefix: int) -> Pair[int] | None:
    """The first pair that is not `same` (None: the trajectories are identical)."""
    if prefix >= s.left_steps.step_count and prefix >= s.right_steps.step_count:
        return None
    return first_divergence(align_from(s, prefix, prefix).pairs)


@dataclass
class StepCell:
    """One side of a row of the page: what the step did, in a line."""

    number: int
    source: str
    tools: str  # its tool calls, name(arguments), cut and masked
    message: str  # the start of its message, masked
    permalink: str = ""  # the step on its trial's page


def step_cells(trajectory: Trajectory, numbers: list[int]) -> dict[int, StepCell]:
    """The steps the page shows of one side: two queries, whatever the trajectory's length."""
    if not numbers:
        return {}
    rows = list(
        Step.objects.filter(trajectory=trajectory, index__gte=min(numbers) - 1, index__lte=max(numbers) - 1)
        .order_by()
        .values_list("pk", "index", "source", Substr("message_text", 1, 2 * LINE))
    )
    calls: dict[int, list[str]] = defaultdict(list)
    tool_calls = ToolCall.objects.filter(step_id__in=[pk for pk, *_ in rows]).order_by("pk")
    for step_id, name, arguments in tool_calls.values_list("step_id", "function_name", "arguments"):
        # Masked before it is cut: a key cut short would no longer look like one.
        calls[step_id].append(f"{name}({scrub(_compact(arguments))[:LINE]})")
    return {
        index + 1: StepCell(index + 1, source, "; ".join(calls[pk])[: 2 * LINE], scrub(head)[:LINE])
        for pk, index, source, head in rows
    }


def _compact(value: object) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # integers past 64 bits, or nested past orjson's 255 levels
        return json.dumps(value, ensure_ascii=False, default=str)


FOLD = 4  # a run of at least this many identical pairs is folded on the page


@dataclass
class Row:
    pair: Pair[int]
    left: StepCell | None
    right: StepCell | None
    is_divergence: bool


@dataclass
class Run:
    rows: list[Row]
    folded: bool  # a run of identical pairs the page shows collapsed

    @property
    def last(self) -> Row:
        return self.rows[-1]


@dataclass
class Page:
    sides: Sides
    prefix: int  # identical steps from the start
    divergence: Pair[int] | None
    left_start: int  # 0-based indexes the window starts at
    right_start: int
    runs: list[Run]
    next_start: tuple[int, int] | None  # 1-based step numbers of the next window


def page(s: Sides, left_number: int | None, right_number: int | None) -> Page:
    """One window of the page: by default starting a few steps above the first divergence."""
    prefix = common_prefix(s.left_steps, s.right_steps)
    if left_number is None or right_number is None:
        left_start = right_start = max(0, prefix - BEFORE_DIVERGENCE)
        settled = align_from(s, left_start, right_start)
        # the divergence as this window aligns it; a window that stops before it starts there instead
        if first_divergence(settled.pairs) is None and left_start < prefix:
            left_start = right_start = prefix
            settled = align_from(s, left_start, right_start)
        divergence_pair = first_divergence(settled.pairs)
    else:
        left_start, right_start = max(0, left_number - 1), max(0, right_number - 1)
        settled = align_from(s, left_start, right_start)
        divergence_pair = divergence(s, prefix)
    left_cells = step_cells(s.left_steps, [p.left for p in settled.pairs if p.left is not None])
    right_cells = step_cells(s.right_steps, [p.right for p in settled.pairs if p.right is not None])
    for trial, cells in ((s.left, left_cells), (s.right, right_cells)):
        for number, cell in cells.items():
            cell.permalink = f"{step_url(trial.pk, number)}#step-{number}"
    rows = [
        Row(
            pair,
            left_cells.get(pair.left) if pair.left is not None else None,
            right_cells.get(pair.right) if pair.right is not None else None,
            pair == divergence_pair,
        )
        for pair in settled.pairs
    ]
    next_left, next_right = left_start + settled.left_used, right_start + settled.right_used
    more = next_left < s.left_steps.step_count or next_right < s.right_steps.step_count
    return Page(
        s,
        prefix,
        divergence_pair,
        left_start,
        right_start,
        runs(rows),
        (next_left + 1, next_right + 1) if more else None,
    )


def runs(rows: list[Row]) -> list[Run]:
    """Rows cut into runs: identical pairs together (folded when long enough), the rest one by one."""
    out: list[Run] = []
    for row in rows:
        same = row.pair.status == "same"
        if same and out and out[-1].rows[-1].pair.status == "same":
            out[-1].rows.append(row)
        else:
            out.append(Run([row], False))
    for run in out:
        run.folded = run.rows[0].pair.status == "same" and len(run.rows) >= FOLD
    return out


def compare_with(trial: Trial) -> QuerySet[Trial]:
    """Other trials of the trial's task (other attempts, other configurations and jobs), for its page."""
    if trial.task is None:
        return Trial.objects.none()
    return (
        Trial.objects.filter(task__in=Task.objects.paired_with(trial.task))  # (its dataset's other versions too)
        .exclude(pk=trial.pk)
        .select_related("configuration", "job")
        .order_by("configuration_id", "job_id", "attempt", "pk")[:COMPARE_WITH]
    )
