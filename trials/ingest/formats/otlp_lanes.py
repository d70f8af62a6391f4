"""A streamed OTLP file's lanes, read through its index (otlp_stream.Index), never held whole: its spans
by id, the ids of its model calls around others, and its steps, made by a pass over the file. No Django.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from trials.ingest.formats.otlp import Span

if TYPE_CHECKING:
    from trials.ingest.formats.otlp_stream import Index  # (it makes these views of itself)


class LaneView(Mapping[str, Span]):
    """A lane's spans by id, for `LaneSteps`: the model calls around others whole, the rest light."""

    def __init__(self, index: Index, trial: int, lane: int, kept: dict[int, Span]) -> None:
        self.index, self.trial, self.lane, self.kept = index, trial, lane, kept

    def __getitem__(self, span_id: str) -> Span:
        pos = self.index.find(span_id)
        if pos is None or self.index.lane[pos] != self.lane or self.index.trial_of[self.index.trace[pos]] != self.trial:
            raise KeyError(span_id)
        return self.kept.get(pos) or self.index.light(pos)

    def __iter__(self) -> Iterator[str]:
        return (
            f"{self.index.span[p]:016x}" for p in range(len(self.index.span)) if f"{self.index.span[p]:016x}" in self
        )

    def __len__(self) -> int:
        return sum(1 for _ in self)


class WrapperIds(Collection[str]):
    """The ids of a lane's model calls around others, looked up in the index (not held as text)."""

    def __init__(self, index: Index, positions: set[int]) -> None:
        self.index, self.positions = index, positions

    def __contains__(self, span_id: object) -> bool:
        return isinstance(span_id, str) and self.index.find(span_id) in self.positions

    def __iter__(self) -> Iterator[str]:
        return (f"{self.index.span[p]:016x}" for p in self.positions)

    def __len__(self) -> int:
        return len(self.positions)


class LaneStepsOf(Iterable[dict[str, Any]]):
    """A trajectory's steps, made by a pass over the file each time they are read."""

    def __init__(self, index: Index, trial: int, lane: int) -> None:
        self.index, self.trial, self.lane = index, trial, lane

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for _, _, steps in self.index.walk({self.trial: {self.lane}}):
            yield from steps
