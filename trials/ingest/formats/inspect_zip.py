"""Reading an Inspect `.eval` ZIP member by member, never the whole archive into memory. Pure: no Django.

inspect_ai writes its members Zstandard-compressed (ZIP method 93, through zipfile-zstd),
which Python's zipfile cannot read: such a member is streamed through `zstandard` from
its place in the file. A ZIP cut off before its central directory (or whose directory
zipfile refuses) is read from its local headers, one whole member after another. Every
member, whichever way it is read, comes through `archives.capped`: the upload's limits
hold, and a member that expands past the size its header claims is stopped there.
"""

from __future__ import annotations

import io
import re
import struct
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import zstandard

from trials.ingest.archives import DEFAULT_LIMITS, Budget, Expansion, capped

ZSTD = 93  # APPNOTE 4.4.5: Zstandard
FIRST_MEMBERS = ("_journal/start.json", "header.json")
SAMPLE = re.compile(r"^samples/[^/]+\.json$")
_LOCAL = struct.Struct("<4sHHHHHIIIHH")  # a local file header (APPNOTE 4.3.7)
READ_ERRORS = (zipfile.BadZipFile, zlib.error, zstandard.ZstdError, EOFError, NotImplementedError, OSError)


def is_eval_file(path: Path) -> bool:
    """A ZIP whose first member is the one inspect_ai writes first (read from its first local header).

    (Not a sample: any ZIP of a folder named `samples` would be taken for a log.)"""
    with open(path, "rb") as f:
        head = f.read(_LOCAL.size + 200)
    if len(head) < _LOCAL.size or head[:4] != b"PK\x03\x04":
        return False
    name_length = _LOCAL.unpack(head[: _LOCAL.size])[9]
    name = head[_LOCAL.size : _LOCAL.size + name_length].decode("utf-8", "replace")
    return name in FIRST_MEMBERS


class _Window(io.RawIOBase):
    """`size` bytes of a file from `start`: one member's compressed data."""

    def __init__(self, f: IO[bytes], start: int, size: int):
        self.f, self.at, self.left = f, start, size

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self.f.close()
        super().close()

    def readinto(self, buffer: Any) -> int:
        want = min(len(buffer), self.left)
        if want <= 0:
            return 0
        self.f.seek(self.at)
        data = self.f.read(want)
        buffer[: len(data)] = data
        self.at += len(data)
        self.left -= len(data)
        return len(data)


def budget_for(path: Path, rel: str, budget: Budget | None) -> Budget:
    """The budget a log's members are charged to: the upload's, or (read on its own) this file's."""
    return budget or Budget(Expansion(path), rel, DEFAULT_LIMITS)


def _raw_member(path: Path, archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> IO[bytes]:
    if info.compress_type != ZSTD:
        return archive.open(info)
    f = open(path, "rb")
    f.seek(info.header_offset)
    head = f.read(_LOCAL.size)
    if len(head) < _LOCAL.size or head[:4] != b"PK\x03\x04":
        f.close()
        raise zipfile.BadZipFile(f"no local header for {info.filename}")
    *_, name_length, extra_length = _LOCAL.unpack(head)
    start = info.header_offset + _LOCAL.size + name_length + extra_length
    window = io.BufferedReader(_Window(f, start, info.compress_size), 1 << 16)
    return zstandard.ZstdDecompressor().stream_reader(window, read_across_frames=True, closefd=True)


def open_member(path: Path, archive: zipfile.ZipFile, info: zipfile.ZipInfo, budget: Budget) -> IO[bytes]:
    """A stream of one member's bytes, decompressed as they are read, under the budget and its claimed size."""
    return capped(_raw_member(path, archive, info), info.filename, budget, info.file_size)


def read_member(path: Path, archive: zipfile.ZipFile, info: zipfile.ZipInfo, budget: Budget | None = None) -> bytes:
    with open_member(path, archive, info, budget_for(path, path.name, budget)) as stream:
        return stream.read()


def local_members(path: Path, budget: Budget) -> Iterator[tuple[str, bytes | None]]:
    """(name, bytes) of each whole member from the local headers; (name, None) where the file ends inside one.

    A member past a limit raises `archives.OverLimit`, as one read through the directory does."""
    with open(path, "rb") as f:
        while True:
            head = f.read(_LOCAL.size)
            if len(head) < _LOCAL.size or head[:4] != b"PK\x03\x04":
                return
            _, _, flags, method, _, _, _, compressed, size, name_length, extra_length = _LOCAL.unpack(head)
            name = f.read(name_length).decode("utf-8", "replace")
            f.seek(extra_length, 1)
            descriptor = bool(flags & 0x08)
            member = _LocalMember(f, method, compressed, descriptor)
            try:
                with capped(io.BufferedReader(member), name, budget, None if descriptor else size) as stream:
                    data: bytes | None = stream.read()
            except (zlib.error, zstandard.ZstdError, EOFError):
                data = None
            yield name, data
            if data is None:
                return
            member.skip_descriptor()


class _LocalMember(io.RawIOBase):
    """A member's data decompressed from its place after its local header; `whole` once its end was read."""

    FEED = 256  # compressed bytes a call: a Zstandard block of 4 bytes may make 128 KiB, so output stays small

    def __init__(self, f: IO[bytes], method: int, compressed: int, descriptor: bool):
        self.f, self.method, self.descriptor = f, method, descriptor
        self.left = compressed  # (stored members: the bytes still to read)
        self.whole = False
        self.pending = b""
        self.decoder: Any = None
        if method == 8:
            self.decoder = zlib.decompressobj(-15)
        elif method == ZSTD:
            self.decoder = zstandard.ZstdDecompressor().decompressobj()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.decoder is None and (self.method != 0 or self.descriptor):
            raise EOFError("a member neither stored, deflated nor Zstandard")  # (what Inspect writes)
        while not self.pending and not self.whole:
            self.pending = self._more()
        n = min(len(buffer), len(self.pending))
        buffer[:n] = self.pending[:n]
        self.pending = self.pending[n:]
        return n

    def _more(self) -> bytes:
        if self.decoder is None:  # stored
            data = self.f.read(min(self.left, 1 << 16))
            self.left -= len(data)
            if not data and self.left:
                raise EOFError("the file ends inside the member")
            self.whole = self.left == 0
            return data
        chunk = self.f.read(self.FEED)
        if not chunk:
            raise EOFError("the file ends inside the member")
        out = self.decoder.decompress(chunk)
        if self.decoder.eof:
            self.whole = True
            self.f.seek(-len(self.decoder.unused_data), 1)
        return bytes(out)

    def skip_descriptor(self) -> None:
        if self.descriptor:  # (sizes after the data: an optional signature, crc, two sizes)
            self.f.seek(12 if self.f.read(4) == b"PK\x07\x08" else 8, 1)
