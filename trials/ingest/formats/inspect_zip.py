"""Reading an Inspect `.eval` ZIP member by member, never the whole archive into memory. Pure: no Django.

inspect_ai writes its members Zstandard-compressed (ZIP method 93, through zipfile-zstd),
which Python's zipfile cannot read: such a member is streamed through `zstandard` from
its place in the file. A ZIP cut off before its central directory is read from its local
headers, one whole member after another.
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


def open_member(path: Path, archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> IO[bytes]:
    """A stream of one member's bytes, decompressed as they are read."""
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


def read_member(path: Path, archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    with open_member(path, archive, info) as stream:
        return stream.read()


def local_members(path: Path) -> Iterator[tuple[str, bytes | None]]:
    """(name, bytes) of each whole member from the local headers; (name, None) where the file ends inside one."""
    with open(path, "rb") as f:
        while True:
            head = f.read(_LOCAL.size)
            if len(head) < _LOCAL.size or head[:4] != b"PK\x03\x04":
                return
            _, _, flags, method, _, _, _, size, _, name_length, extra_length = _LOCAL.unpack(head)
            name = f.read(name_length).decode("utf-8", "replace")
            f.seek(extra_length, 1)
            data = _member_data(f, method, size, bool(flags & 0x08))
            yield name, data
            if data is None:
                return


def _member_data(f: IO[bytes], method: int, size: int, descriptor: bool) -> bytes | None:
    if method == 0 and not descriptor:
        data = f.read(size)
        return data if len(data) == size else None
    if method not in (8, ZSTD):
        return None  # (Inspect writes stored, deflated or Zstandard members)
    decoder: Any = zlib.decompressobj(-15) if method == 8 else zstandard.ZstdDecompressor().decompressobj()
    out = bytearray()
    while not decoder.eof:
        chunk = f.read(1 << 16)
        if not chunk:
            return None
        try:
            out += decoder.decompress(chunk)
        except (zlib.error, zstandard.ZstdError):
            return None
    f.seek(-len(decoder.unused_data), 1)
    if descriptor:  # (sizes after the data: an optional signature, crc, two sizes)
        f.seek(12 if f.read(4) == b"PK\x07\x08" else 8, 1)
    return bytes(out)
