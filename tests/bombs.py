"""Archives whose members expand far past their size, written as a stream (pure: no Django).

Shared by the tests and `bench/bomb_bench.py`: the bomb is made chunk by chunk, so a
1.5 GiB member costs a few megabytes to write. A member's directory entry may lie about
its size (`claimed`), as an attacker's does.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import orjson
import zstandard

ZSTD = 93  # the ZIP method inspect_ai writes
CHUNK = 1024 * 1024


@dataclass
class RawMember:
    name: str
    data: Iterable[bytes]  # the uncompressed bytes, in chunks
    claimed: int | None = None  # the size the headers give; None: the true size
    method: int = ZSTD


def spaces(total: int) -> Iterable[bytes]:
    """`total` spaces, a megabyte at a time (one chunk object, reused)."""
    block = b" " * CHUNK
    whole, rest = divmod(total, CHUNK)
    for _ in range(whole):
        yield block
    if rest:
        yield block[:rest]


def write_raw_zip(path: Path, members: list[RawMember]) -> Path:
    """A ZIP written by hand: each member Zstandard- (93) or deflate- (8) compressed as it streams."""
    central = b""
    with open(path, "wb") as f:
        for member in members:
            name = member.name.encode("utf-8")
            offset = f.tell()
            f.write(b"\0" * (30 + len(name)))  # (the local header, written once the sizes are known)
            crc, size, compressed = 0, 0, 0
            if member.method == ZSTD:
                compressor = zstandard.ZstdCompressor().compressobj()
            else:
                compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
            for chunk in member.data:
                crc, size = zlib.crc32(chunk, crc), size + len(chunk)
                out = compressor.compress(chunk)
                compressed += len(out)
                f.write(out)
            out = compressor.flush()
            compressed += len(out)
            f.write(out)
            claimed = size if member.claimed is None else member.claimed
            fields = (20, 0x800, member.method, 0, 0, crc, compressed, claimed, len(name))
            end = f.tell()
            f.seek(offset)
            f.write(struct.pack("<IHHHHHIIIHH", 0x04034B50, *fields, 0) + name)
            f.seek(end)
            central += struct.pack("<IH", 0x02014B50, 20) + struct.pack(
                "<HHHHHIIIHHHHHII", *fields, 0, 0, 0, 0, 0, offset
            )
            central += name
        start = f.tell()
        f.write(central)
        f.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), len(central), start, 0))
    return path


EVAL_HEADER = {"version": 2, "status": "success", "eval": {"task": "bombs", "model": "mockllm/model"}}


def eval_sample(sample_id: str) -> dict:
    """The least EvalSample the Inspect reader takes: graded correct."""
    return {"id": sample_id, "epoch": 1, "input": "Say hi.", "target": "hi", "scores": {"match": {"value": "C"}}}


def json_member(name: str, value: object, claimed: int | None = None, method: int = ZSTD) -> RawMember:
    return RawMember(name, [orjson.dumps(value)], claimed, method)


def lying_eval(path: Path, bomb_bytes: int, claimed: int | None = 100, method: int = ZSTD) -> Path:
    """An `.eval` of a header, one good sample and a bomb sample of `bomb_bytes` spaces claiming `claimed` bytes."""
    return write_raw_zip(
        path,
        [
            json_member("header.json", EVAL_HEADER),
            json_member("samples/good_epoch_1.json", eval_sample("good")),
            RawMember("samples/bomb_epoch_1.json", spaces(bomb_bytes), claimed, method),
        ],
    )
