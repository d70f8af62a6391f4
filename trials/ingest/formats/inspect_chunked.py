"""A chunked Inspect sample inside an `.eval` (inspect_ai's log/_recorders/chunked/format.py). No Django.

Newer inspect_ai can write one sample as a folder, told apart from a whole sample by the ZIP's
listing alone (no version bump; one log may mix both shapes):

    samples/<id>_epoch_<n>/sample.json          the sample without its messages and events
    samples/<id>_epoch_<n>/metadata.json        (only when not empty)
    samples/<id>_epoch_<n>/messages/<start>.json  the message pool, `model` events' `input_refs` index it
    samples/<id>_epoch_<n>/events/<start>.json    the events, 1,000 a chunk
    samples/<id>_epoch_<n>/attachments/<start>.json  texts, `attachment://<index>` names them

Each chunk is named by the index of its first item. The events are read a chunk at a time, each
pass anew, through the capped member reader (inspect_zip.open_member), so memory holds one chunk.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from trials.ingest.archives import Budget
from trials.ingest.formats.inspect_zip import READ_ERRORS, read_member
from trials.ingest.values import as_list

SHELL = re.compile(r"^(samples/[^/]+)/sample\.json$")
_CHUNK = re.compile(r"^(samples/[^/]+)/(messages|events|attachments)/(\d+)\.json$")


@dataclass
class ChunkedSample:
    """One chunked sample's members: its shell, metadata and each sequence's chunks in order."""

    prefix: str
    shell: zipfile.ZipInfo
    metadata: zipfile.ZipInfo | None = None
    chunks: dict[str, list[tuple[int, zipfile.ZipInfo]]] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return self.shell.file_size + sum(i.file_size for chunks in self.chunks.values() for _, i in chunks)

    def members(self, sequence: str) -> list[tuple[int, zipfile.ZipInfo]]:
        return sorted(self.chunks.get(sequence, []), key=lambda c: c[0])


def chunked_samples(infos: list[zipfile.ZipInfo]) -> dict[str, ChunkedSample]:
    """The chunked samples of an archive, by their shell's member name, from its listing."""
    found: dict[str, ChunkedSample] = {}
    for info in infos:
        if m := SHELL.match(info.filename):
            found[m.group(1)] = ChunkedSample(m.group(1), info)
    for info in infos:
        if (m := _CHUNK.match(info.filename)) and m.group(1) in found:
            found[m.group(1)].chunks.setdefault(m.group(2), []).append((int(m.group(3)), info))
        elif info.filename == f"{info.filename.rpartition('/')[0]}/metadata.json":
            if sample := found.get(info.filename.rpartition("/")[0]):
                sample.metadata = info
    return {s.shell.filename: s for s in found.values()}


def read_shell(path: Path, archive: zipfile.ZipFile, sample: ChunkedSample, budget: Budget) -> Any:
    """The sample as a whole one reads, without its events: shell, metadata, message pool, attachments
    (orjson.JSONDecodeError and the read errors raise, naming nothing: the caller names the member)."""
    shell = orjson.loads(read_member(path, archive, sample.shell, budget))
    if not isinstance(shell, dict):
        return shell
    if sample.metadata is not None:
        shell["metadata"] = orjson.loads(read_member(path, archive, sample.metadata, budget))
    pool = [m for _, info in sample.members("messages") for m in as_list(_chunk(path, archive, info, budget))]
    if pool:
        shell["events_data"] = {**(shell.get("events_data") or {}), "messages": pool}
    attachments = dict(shell.get("attachments") or {})
    for start, info in sample.members("attachments"):
        for n, text in enumerate(as_list(_chunk(path, archive, info, budget))):
            attachments[str(start + n)] = text
    if attachments:
        shell["attachments"] = attachments
    return shell


def events(
    path: Path, archive: zipfile.ZipFile, sample: ChunkedSample, budget: Budget, bad: dict[str, str]
) -> Iterator[Any]:
    """The sample's events in order, one chunk held at a time; a chunk that cannot be read is skipped,
    named in `bad` (member -> why)."""
    for _, info in sample.members("events"):
        try:
            chunk = _chunk(path, archive, info, budget)
        except (*READ_ERRORS, orjson.JSONDecodeError) as exc:
            bad[info.filename] = str(exc)
            continue
        yield from as_list(chunk)


def _chunk(path: Path, archive: zipfile.ZipFile, info: zipfile.ZipInfo, budget: Budget) -> Any:
    return orjson.loads(read_member(path, archive, info, budget))
