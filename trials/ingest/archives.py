"""Safe extraction of .zip, .tar, .tar.gz and .tgz uploads, and of a lone gzipped file (.json.gz).

Members are checked before anything is written: no absolute paths, no `..`, no links,
devices or FIFOs. Sizes are counted as bytes are written (headers can lie), so a bomb
stops at the limit whatever it claims.
"""

from __future__ import annotations

import gzip
import shutil
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from trials.ingest.records import PackError, Problem

if TYPE_CHECKING:
    from _typeshed import SupportsRead

CHUNK = 1024 * 1024


@dataclass
class Limits:
    max_expanded_bytes: int
    max_ratio: int
    max_members: int
    max_file_bytes: int


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


class _MemberTooBig(Exception):
    pass


class _Budget:
    def __init__(self, expansion: Expansion, archive_name: str, limits: Limits):
        self.limits = limits
        self.archive_name = archive_name
        self.expansion = expansion

    def charge(self, member: str, n: int, member_total: int) -> None:
        expansion, limits = self.expansion, self.limits
        expansion.total += n
        if member_total > limits.max_file_bytes:
            raise _MemberTooBig
        if expansion.total > limits.max_expanded_bytes:
            raise self._error(member, f"archive expands past the limit of {limits.max_expanded_bytes} bytes")
        if expansion.total > 10 * CHUNK and expansion.total / expansion.compressed > limits.max_ratio:
            raise self._error(member, f"compression ratio over {limits.max_ratio}:1 (a zip bomb?)")

    def _error(self, member: str, message: str) -> PackError:
        return PackError(
            Problem(
                file=self.archive_name,
                json_path=member,
                message=message,
                kept="the archive's raw bytes; nothing was extracted",
            )
        )


def _copy(src: SupportsRead[bytes], dest: Path, member: str, budget: _Budget) -> Problem | None:
    """Write one member; one over the single-file limit is left out (and said so), as in a folder."""
    written = 0
    try:
        with open(dest, "wb") as out:
            while chunk := src.read(CHUNK):
                written += len(chunk)
                budget.charge(member, len(chunk), written)
                out.write(chunk)
    except _MemberTooBig:
        dest.unlink()
        limit = budget.limits.max_file_bytes
        return _left_out(budget.archive_name, member, f"archive member left out: it expands past {limit} bytes")
    return None


def extract(
    archive: Path, dest: Path, archive_name: str, limits: Limits, expansion: Expansion | None = None
) -> list[Problem]:
    """Extract into `dest`. Unsafe and oversized members are skipped and reported; bombs and damage raise.

    `expansion` is the upload's running total when this archive was inside another one.
    """
    kind = archive_kind(archive)
    dest.mkdir(parents=True, exist_ok=True)
    budget = _Budget(expansion or Expansion(archive), archive_name, limits)
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
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError, ValueError) as exc:
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


def _extract_zip(archive: Path, dest: Path, budget: _Budget) -> list[Problem]:
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
                if too_big := _copy(src, target, name, budget):
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


def _extract_gunzipped(archive: Path, dest: Path, budget: _Budget) -> list[Problem]:
    """A lone gzipped file (trajectory.json.gz, events.jsonl.gz): the one file inside, under the limits."""
    name = budget.archive_name.rpartition("/")[2]
    name = name[: -len(".gz")] if name.lower().endswith(".gz") and len(name) > 3 else f"{name}.gunzipped"
    with gzip.open(archive) as src:
        too_big = _copy(src, dest / name, name, budget)
    return [too_big] if too_big else []


def _extract_tar(archive: Path, dest: Path, budget: _Budget) -> list[Problem]:
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
                if too_big := _copy(src, target, name, budget):
                    problems.append(too_big)
    return problems
