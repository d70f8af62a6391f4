"""Safe extraction of .zip, .tar, .tar.gz and .tgz uploads, and of a lone gzipped file (.json.gz).

Members are checked before anything is written: no absolute paths, no `..`, no links,
devices or FIFOs. Sizes are counted as bytes are written (headers can lie), so a bomb
stops at the limit whatever it claims.
"""

from __future__ import annotations

import gzip
import io
import shutil
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any, Protocol

from trials.ingest.records import PackError, Problem

CHUNK = 1024 * 1024


@dataclass
class Limits:
    max_expanded_bytes: int
    max_ratio: int
    max_members: int
    max_file_bytes: int
    max_run_rows: int = 100_000  # a run file's rows read as trials (IMPORT_MAX_RUN_ROWS)


# What a parser called without the import's limits reads under: the defaults of benchviewer/settings.py.
DEFAULT_LIMITS = Limits(
    max_expanded_bytes=4 * 1024 * 1024 * 1024, max_ratio=200, max_members=200_000, max_file_bytes=1024 * 1024 * 1024
)


def archive_kind(path: Path) -> str:
    """'zip', 'tar' or '' from the file's first bytes, never from its name."""
    with open(path, "rb") as f:
        head = f.read(512)
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return "zip"
    if head[:2] == b"\x1f\x8b":
        return "tar"  # gzip: a .tar.gz / .tgz, or a lone gzipped file (extract tells them apart)
    if _tar_header(head):
        return "tar"
    return ""


def _tar_header(head: bytes) -> bool:
    """Do these first bytes start a tar archive (its "ustar" magic)?"""
    return len(head) >= 262 and head[257:262] == b"ustar"


def unsafe_name_reason(name: str) -> str:
    if not name or "\x00" in name:
        return "empty or NUL in the name"
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        return "absolute path"
    parts = PurePosixPath(name.replace("\\", "/")).parts
    if ".." in parts:
        return "path traversal (..)"
    return ""


MAX_NESTING = 3  # an archive in an archive in an archive; deeper is refused


class Expansion:
    """What one upload's archives have expanded to so far, nested archives included.

    The size and ratio limits hold for the whole upload: an archive of archives must not
    get a fresh budget for each one.
    """

    def __init__(self, upload: Path):
        self.compressed = max(upload.stat().st_size, 1)
        self.total = 0


class OverLimit(Exception):
    """A member read past a limit. `spent`: the upload's budget is gone, nothing more of it may be read."""

    def __init__(self, member: str, message: str, spent: bool):
        super().__init__(message)
        self.member, self.message, self.spent = member, message, spent


class Budget:
    """What one archive's members may still expand to: the upload's totals, and each member's own limit."""

    def __init__(self, expansion: Expansion, archive_name: str, limits: Limits):
        self.limits = limits
        self.archive_name = archive_name
        self.expansion = expansion
        self._charged: dict[str, int] = {}  # (a member read twice, as a streamed sample is, is charged once)

    def charge(self, member: str, member_total: int) -> None:
        """`member_total` bytes of `member` have come out so far."""
        expansion, limits = self.expansion, self.limits
        if member_total > limits.max_file_bytes:
            message = f"it expands past the file limit of {limits.max_file_bytes} bytes (IMPORT_MAX_FILE_BYTES)"
            raise OverLimit(member, message, spent=False)
        grown = member_total - self._charged.get(member, 0)
        if grown <= 0:
            return  # (bytes charged when the member was read before)
        self._charged[member] = member_total
        expansion.total += grown
        if expansion.total > limits.max_expanded_bytes:
            message = f"archive expands past the limit of {limits.max_expanded_bytes} bytes (IMPORT_MAX_EXPANDED_BYTES)"
            raise OverLimit(member, message, spent=True)
        if expansion.total > 10 * CHUNK and expansion.total / expansion.compressed > limits.max_ratio:
            message = f"compression ratio over {limits.max_ratio}:1 (a zip bomb?; IMPORT_MAX_ARCHIVE_RATIO)"
            raise OverLimit(member, message, spent=True)

    def _error(self, member: str, message: str) -> PackError:
        return PackError(
            Problem(
                file=self.archive_name,
                json_path=member,
                message=message,
                kept="the archive's raw bytes; nothing was extracted",
            )
        )


class Source(Protocol):
    """A member's decompressed bytes as its archive's reader gives them."""

    def read(self, size: int = ..., /) -> bytes: ...

    def close(self) -> None: ...


class CappedReader(io.RawIOBase):
    """One member's bytes as they come out of its archive, charged to the budget: how every member is read.

    `claimed` is the size the archive's directory gives (None when it gives none): a member
    that expands past it is a lie, stopped at the first byte past it.
    """

    def __init__(self, source: Source, member: str, budget: Budget, claimed: int | None = None):
        self.source, self.member, self.budget, self.claimed = source, member, budget, claimed
        self.total = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        want = len(buffer) if self.claimed is None else min(len(buffer), self.claimed - self.total + 1)
        data = self.source.read(min(want, CHUNK))
        n = len(data)
        buffer[:n] = data
        self.total += n
        if self.claimed is not None and self.total > self.claimed:
            message = f"it expands past the {self.claimed} bytes the archive's directory claims for it"
            raise OverLimit(self.member, message, spent=False)
        self.budget.charge(self.member, self.total)
        return n

    def close(self) -> None:
        self.source.close()
        super().close()


def capped(source: Source, member: str, budget: Budget, claimed: int | None = None) -> IO[bytes]:
    """`source` (a member's decompressed bytes) read through a `CappedReader`, buffered."""
    return io.BufferedReader(CappedReader(source, member, budget, claimed), 1 << 16)


def _copy(src: Source, dest: Path, member: str, budget: Budget, claimed: int | None = None) -> Problem | None:
    """Write one member; one past its own limit is left out (and said so), as in a folder."""
    try:
        with capped(src, member, budget, claimed) as reader, open(dest, "wb") as out:
            while chunk := reader.read(CHUNK):
                out.write(chunk)
    except OverLimit as exc:
        dest.unlink(missing_ok=True)
        if exc.spent:
            raise budget._error(member, exc.message) from exc
        return _left_out(budget.archive_name, member, f"archive member left out: {exc.message}")
    return None


def extract(
    archive: Path, dest: Path, archive_name: str, limits: Limits, expansion: Expansion | None = None
) -> list[Problem]:
    """Extract into `dest`. Unsafe and oversized members are skipped and reported; bombs and damage raise.

    `expansion` is the upload's running total when this archive was inside another one.
    """
    kind = archive_kind(archive)
    dest.mkdir(parents=True, exist_ok=True)
    budget = Budget(expansion or Expansion(archive), archive_name, limits)
    try:
        if kind == "zip":
            problems = _extract_zip(archive, dest, budget)
        elif kind == "tar" and _gzipped_tar(archive) is False:
            problems = _extract_gunzipped(archive, dest, budget)
        elif kind == "tar":
            problems = _extract_tar(archive, dest, budget)
        else:
            raise PackError(Problem(archive_name, "not a zip or tar archive"))
    except PackError:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError, ValueError, NotImplementedError) as exc:
        shutil.rmtree(dest, ignore_errors=True)
        # (an OSError's text would name the server's extraction folder; tarfile's runs over lines)
        reason = " ".join(str(exc.strerror if isinstance(exc, OSError) and exc.strerror else exc).split())
        raise PackError(
            Problem(
                archive_name,
                f"damaged or truncated archive: {reason}",
                kept="the archive's raw bytes; nothing was extracted",
            )
        ) from exc
    return problems


def _left_out(archive_name: str, member: str, message: str) -> Problem:
    return Problem(
        file=archive_name,
        json_path=member,
        message=message,
        kept="the rest of the archive; this member only in the archive's raw bytes",
    )


def _skip(archive_name: str, member: str, reason: str) -> Problem:
    return _left_out(archive_name, member, f"unsafe archive member skipped: {reason}")


def _clash(target: Path, is_dir: bool = False) -> str:
    """Why a member cannot go where its name says (a duplicate, or a file where its folder is), or ''."""
    if target.exists() and not (is_dir and target.is_dir()):
        return "archive member left out: a member of the same name came first (it is kept)"
    try:
        (target if is_dir else target.parent).mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        return "archive member left out: a file of an earlier member is where its folder would be"
    return ""


def _target(dest: Path, name: str) -> Path:
    target = (dest / name).resolve()
    if not target.is_relative_to(dest.resolve()):
        raise ValueError(f"member {name!r} resolves outside the extraction folder")
    return target


def _extract_zip(archive: Path, dest: Path, budget: Budget) -> list[Problem]:
    problems: list[Problem] = []
    with zipfile.ZipFile(archive) as zf:
        members = zf.infolist()
        if len(members) > budget.limits.max_members:
            raise budget._error("", f"more than {budget.limits.max_members} members")
        for info in members:
            name = info.filename
            reason = unsafe_name_reason(name)
            mode = info.external_attr >> 16
            if not reason and mode and (mode & 0o170000) not in (0, 0o100000, 0o040000):
                reason = "link or special file"
            if reason:
                problems.append(_skip(budget.archive_name, name, reason))
                continue
            target = _target(dest, name)
            if clash := _clash(target, info.is_dir()):
                problems.append(_left_out(budget.archive_name, name, clash))
                continue
            if info.is_dir():
                continue
            with zf.open(info) as src:
                if too_big := _copy(src, target, name, budget, info.file_size):
                    problems.append(too_big)
    return problems


def _gzipped_tar(archive: Path) -> bool | None:
    """For a gzip file: whether a tar is inside (None: it is not gzip, or too damaged to tell)."""
    try:
        with gzip.open(archive) as f:
            head = f.read(512)
    except (OSError, EOFError):
        return None
    return _tar_header(head) if head else None


def _extract_gunzipped(archive: Path, dest: Path, budget: Budget) -> list[Problem]:
    """A lone gzipped file (trajectory.json.gz, events.jsonl.gz): the one file inside, under the limits."""
    name = budget.archive_name.rpartition("/")[2]
    name = name[: -len(".gz")] if name.lower().endswith(".gz") and len(name) > 3 else f"{name}.gunzipped"
    with gzip.open(archive) as src:
        too_big = _copy(src, dest / name, name, budget)
    return [too_big] if too_big else []


def _extract_tar(archive: Path, dest: Path, budget: Budget) -> list[Problem]:
    problems: list[Problem] = []
    count = 0
    with tarfile.open(archive, mode="r:*") as tf:
        for member in tf:  # streamed: a truncated archive raises here, a bomb stops at the budget
            count += 1
            if count > budget.limits.max_members:
                raise budget._error("", f"more than {budget.limits.max_members} members")
            name = member.name
            reason = unsafe_name_reason(name)
            if not reason and not (member.isfile() or member.isdir()):
                reason = "link, device or FIFO"
            if reason:
                problems.append(_skip(budget.archive_name, name, reason))
                continue
            target = _target(dest, name)
            if clash := _clash(target, member.isdir()):
                problems.append(_left_out(budget.archive_name, name, clash))
                continue
            if member.isdir():
                continue
            src = tf.extractfile(member)
            if src is None:
                continue
            with src:
                if too_big := _copy(src, target, name, budget, member.size):
                    problems.append(too_big)
    return problems
