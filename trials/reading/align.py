"""Aligning two trajectories step by step (pure: no Django).

A step is a `Signed` item: its `align_key` (the names of its tool calls, or its source when it
has none) and its `signature` (the key with normalised arguments and results, or the message
text), as trials.ingest.signatures computes them. Steps with equal signatures pair as `same`
(difflib's longest matching blocks of signatures); in the gaps between, steps with equal keys
pair as `changed` (the same tools, other arguments or results); two steps with different tools
are never a pair, and are `only_left` / `only_right`.

`align_window` aligns a window of each side and says how much of each it has settled, so a
50,000-step trajectory is aligned a window at a time.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from difflib import Match, SequenceMatcher
from typing import Generic, Literal, NamedTuple, TypeVar

Status = Literal["same", "changed", "only_left", "only_right"]
R = TypeVar("R")


class Signed(NamedTuple, Generic[R]):
    ref: R  # what a pair names: a step number, a row
    align_key: Hashable
    signature: Hashable


class Pair(NamedTuple, Generic[R]):
    left: R | None
    right: R | None
    status: Status


def align(left: Sequence[Signed[R]], right: Sequence[Signed[R]]) -> list[Pair[R]]:
    """Every step of both sides once, in order, paired where they can be."""
    pairs: list[Pair[R]] = []
    i = j = 0
    for block in _matching_blocks([s.signature for s in left], [s.signature for s in right]):
        pairs += _changed_or_alone(left[i : block.a], right[j : block.b])
        pairs += [Pair(left[block.a + k].ref, right[block.b + k].ref, "same") for k in range(block.size)]
        i, j = block.a + block.size, block.b + block.size
    return pairs


def _changed_or_alone(left: Sequence[Signed[R]], right: Sequence[Signed[R]]) -> list[Pair[R]]:
    """A gap between identical runs: steps with the same tools pair as `changed`, the rest stand alone."""
    pairs: list[Pair[R]] = []
    i = j = 0
    for block in _matching_blocks([s.align_key for s in left], [s.align_key for s in right]):
        pairs += [Pair(s.ref, None, "only_left") for s in left[i : block.a]]
        pairs += [Pair(None, s.ref, "only_right") for s in right[j : block.b]]
        pairs += [Pair(left[block.a + k].ref, right[block.b + k].ref, "changed") for k in range(block.size)]
        i, j = block.a + block.size, block.b + block.size
    return pairs


def _matching_blocks(a: list[Hashable], b: list[Hashable]) -> list[Match]:
    """difflib's matching blocks, ending with (len(a), len(b), 0) as it always does."""
    # autojunk off: a trajectory repeats a few tools hundreds of times, and those must still match.
    return SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks()


class Settled(NamedTuple, Generic[R]):
    pairs: list[Pair[R]]
    left_used: int  # steps of each window the pairs cover; the next window starts after them
    right_used: int


def align_window(
    left: Sequence[Signed[R]], right: Sequence[Signed[R]], left_ends: bool, right_ends: bool
) -> Settled[R]:
    """Align windows of two longer sequences; `*_ends`: the window reaches the end of its side.

    Unless both windows reach their ends, the pairs stop at the last pair of two steps: what
    follows may pair with steps past the window, so the next window starts there. A window
    with no pair at all is settled whole (nothing in it matches within reach).
    """
    pairs = align(left, right)
    if not (left_ends and right_ends):
        last = max((n for n, p in enumerate(pairs) if p.status in ("same", "changed")), default=None)
        if last is not None:
            pairs = pairs[: last + 1]
    left_used = sum(1 for p in pairs if p.left is not None)
    right_used = sum(1 for p in pairs if p.right is not None)
    return Settled(pairs, left_used, right_used)


def first_divergence(pairs: Sequence[Pair[R]]) -> Pair[R] | None:
    return next((p for p in pairs if p.status != "same"), None)
