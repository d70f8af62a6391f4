"""Inspect AI logs (inspect_ai's `EvalLog`, log format version 2): `.eval` archives and `.json` logs.

A `.eval` is a ZIP (`header.json`, `samples/<id>_epoch_<n>.json` or a chunked sample's folder
`samples/<id>_epoch_<n>/` (inspect_chunked.py), `summaries.json`, `reductions.json`, `_journal/`).
Its samples are read one member at a time; a member
past STREAM_THRESHOLD is streamed with ijson, once for what is not its events and once
per lane, so memory stays flat however many events it holds. A `.json` log is one
document: read whole when small, sample by sample with ijson when big. A ZIP cut off
before its central directory is read member by member from its local headers, and the
whole samples before the cut are imported.

The eval is a job, its task a dataset, each sample a task, the model with its solver a
configuration; a sample × epoch is a trial (epoch = attempt). What a sample becomes is in
inspect_sample.py, how its events become steps in inspect_events.py. Pure: no Django.
inspect_ai itself is never imported (it is a dev dependency, for the tests' logs).
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import IO, Any

import ijson
import orjson

from trials.ingest.archives import Budget, OverLimit
from trials.ingest.formats import inspect_chunked
from trials.ingest.formats.atif import STREAM_THRESHOLD
from trials.ingest.formats.inspect_sample import EvalContext, Member, sample_trial, top_level
from trials.ingest.formats.inspect_zip import (
    FIRST_MEMBERS,
    READ_ERRORS,
    SAMPLE,
    budget_for,
    local_members,
    open_member,
    read_member,
)
from trials.ingest.jsonio import malformed, open_json
from trials.ingest.records import FormatTraits, PackError, ParsedJob, ParsedPack, ParsedTrial, Problem
from trials.ingest.values import as_dict, as_list, parse_iso

KIND = "inspect"
TRAITS = FormatTraits(KIND, status_by_reward=True)  # (a scorer's value, as a reward, passes at full marks)
_JSON_HEAD = re.compile(rb'^\s*\{\s*"version"\s*:\s*\d+\s*,\s*"status"\s*:')


def sniff_json_log(path: Path) -> bool:
    """An Inspect `.json` log: `version` then `status` first, and an `eval` soon after (how Inspect writes it)."""
    with open_json(path) as f:
        head = f.read(4096)
    return bool(_JSON_HEAD.match(head)) and b'"eval"' in head and b'"task' in head


def is_json_log(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("version"), int) and "task" in as_dict(data.get("eval"))


# ---------------------------------------------------------------- the job


def _job(header: dict[str, Any], rel: str, problems: list[Problem]) -> tuple[ParsedJob, EvalContext]:
    evaluation = as_dict(header.get("eval"))
    if not evaluation.get("task"):
        problems.append(
            Problem(
                rel,
                "the log names no task (eval.task)",
                "eval.task",
                severity="warning",
                kept="the samples, under the task 'inspect'",
            )
        )
    context = EvalContext.of(header, rel)
    stats = as_dict(header.get("stats"))
    result = {k: header[k] for k in ("status", "results", "stats", "error", "reductions") if header.get(k) is not None}
    job = ParsedJob(
        key=context.job_key,
        name=f"{context.task} · {context.model}" if context.model else context.task,
        source_format=KIND,
        started_at=parse_iso(stats.get("started_at") or evaluation.get("created")),
        finished_at=parse_iso(stats.get("completed_at")),
        config={"eval": evaluation, "plan": header.get("plan")},
        result=result,
        extra={"inspect_version": context.version, "log": rel},
    )
    return job, context


# ---------------------------------------------------------------- .eval


def parse_eval(path: Path, rel: str, budget: Budget | None = None) -> ParsedPack:
    """The log's samples as trials; its members read under `budget` (the upload's limits), or the defaults."""
    budget = budget_for(path, rel, budget)
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError):
        return _parse_cut_off(path, rel, budget)
    except (NotImplementedError, ValueError) as exc:  # (a version zipfile refuses, a name not UTF-8 as flagged)
        return _parse_cut_off(path, rel, budget, f"its central directory is refused ({exc})")
    problems: list[Problem] = []
    names = set(archive.namelist())
    header_name = next((n for n in ("header.json", "_journal/start.json") if n in names), "")
    if header_name != "header.json":
        problems.append(
            Problem(
                rel,
                "no header.json: the eval did not finish writing its log",
                "header.json",
                severity="warning",
                kept=f"the samples, with the eval read from {header_name or 'nothing'}",
            )
        )
    header = _member_json(path, archive, header_name, rel, problems, budget) if header_name else {}
    if "reductions.json" in names and isinstance(header, dict):  # (the epochs' reducers and reduced values)
        header["reductions"] = _member_json(path, archive, "reductions.json", rel, problems, budget) or None
    job, context = _job(as_dict(header), rel, problems)
    chunked = inspect_chunked.chunked_samples(archive.infolist())  # (samples as folders, beside whole ones)
    members = [info for info in archive.infolist() if SAMPLE.match(info.filename) or info.filename in chunked]
    if not members:
        _no_samples(as_dict(header), rel, problems)
    pack = ParsedPack(kind=KIND, jobs=[job], problems=problems, trial_count=len(members))
    pack.trials = _archive_trials(path, archive, members, context, pack.problems, budget, chunked)
    return pack


def _no_samples(header: dict[str, Any], rel: str, problems: list[Problem]) -> None:
    """A log with no sample (cancelled before any was written): the job is kept, with what its header says."""
    results = as_dict(header.get("results"))
    said = f"; its results say {results.get('completed_samples')} of {results.get('total_samples')}" if results else ""
    message = f"the log holds no sample (status {header.get('status') or 'unknown'}){said}"
    problems.append(Problem(rel, message, "samples/", severity="warning", kept="the job, with no trial"))


def _member_json(
    path: Path, archive: zipfile.ZipFile, name: str, rel: str, problems: list[Problem], budget: Budget
) -> Any:
    try:
        return orjson.loads(read_member(path, archive, archive.getinfo(name), budget))
    except (*READ_ERRORS, orjson.JSONDecodeError) as exc:
        problems.append(Problem(rel, f"unreadable member: {exc}", name, kept="the raw bytes"))
    except OverLimit as exc:
        problems.append(Problem(rel, f"{name} not read: {exc.message}", name, kept="the raw bytes; the samples"))
    return {}


def _archive_trials(
    path: Path,
    archive: zipfile.ZipFile,
    members: list[zipfile.ZipInfo],
    context: EvalContext,
    problems: list[Problem],
    budget: Budget,
    chunked: dict[str, inspect_chunked.ChunkedSample],
) -> Iterator[ParsedTrial]:
    with archive:
        for done, info in enumerate(members):
            where = Member(context.rel, info.filename, info.file_size)
            try:
                if sample := chunked.get(info.filename):
                    trial = _chunked_sample(path, archive, sample, context, problems, budget)
                elif info.file_size > STREAM_THRESHOLD:
                    opener = partial(open_member, path, archive, info, budget)
                    trial = _streamed_sample(opener, where, context, problems)
                else:
                    trial = _whole_sample(partial(read_member, path, archive, info, budget), where, context, problems)
            except OverLimit as exc:
                problems.append(_over_limit(context.rel, exc, done))
                if exc.spent:
                    return
                continue
            if trial is not None:
                yield trial


def _chunked_sample(
    path: Path,
    archive: zipfile.ZipFile,
    sample: inspect_chunked.ChunkedSample,
    context: EvalContext,
    problems: list[Problem],
    budget: Budget,
) -> ParsedTrial | None:
    where = Member(context.rel, f"{sample.prefix}/", sample.size)
    try:
        shell = inspect_chunked.read_shell(path, archive, sample, budget)
    except (*READ_ERRORS, orjson.JSONDecodeError) as exc:
        _rejected(where, f"{sample.prefix}/: a member of the chunked sample is unreadable: {exc}", problems)
        return None
    bad: dict[str, str] = {}
    events = partial(inspect_chunked.events, path, archive, sample, budget, bad)
    trial = _checked(shell, events, where, context, problems, sample.size > STREAM_THRESHOLD)
    if trial is not None and bad:  # (known after the survey's pass; a streamed sample's later passes skip them too)
        kept = "the sample, without this chunk's events"
        trial.problems += [
            Problem(where.rel, f"unreadable events chunk: {why}", name, severity="warning", kept=kept)
            for name, why in bad.items()
        ]
    return trial


def _over_limit(rel: str, exc: OverLimit, done: int, stops: bool = False) -> Problem:
    """A member stopped at a limit while it was read: which, what limit, and what was kept."""
    kept = (
        f"the raw bytes; the {done} samples before it are read, none after"
        if exc.spent or stops
        else "the raw bytes; this sample is not imported, the others are"
    )
    return Problem(rel, f"member {exc.member} not read: {exc.message}", exc.member, kept=kept)


def _rejected(
    where: Member, message: str, problems: list[Problem], json_path: str = "", line: int | None = None
) -> None:
    problems.append(
        Problem(
            where.rel,
            message,
            json_path or where.name,
            line,
            kept="the raw bytes; this sample is not imported, the others are",
        )
    )


def _whole_sample(
    read: Callable[[], bytes], where: Member, context: EvalContext, problems: list[Problem]
) -> ParsedTrial | None:
    try:
        sample = orjson.loads(read())
    except READ_ERRORS as exc:
        _rejected(where, f"damaged member {where.name}: {exc}", problems)
        return None
    except orjson.JSONDecodeError as exc:
        bad = malformed(where.rel, exc)
        _rejected(where, f"{where.name}: {bad.message}", problems, line=bad.line)
        return None
    return _checked(sample, lambda: iter(as_list(as_dict(sample).get("events"))), where, context, problems, False)


def _streamed_sample(
    open_member: Callable[[], IO[bytes]], where: Member, context: EvalContext, problems: list[Problem]
) -> ParsedTrial | None:
    try:
        with open_member() as stream:
            sample = top_level(stream)
    except (*READ_ERRORS, ijson.JSONError) as exc:
        _rejected(where, f"{where.name}: unreadable: {exc}", problems)
        return None

    def events() -> Iterator[Any]:
        with open_member() as stream:
            yield from ijson.items(stream, "events.item", use_float=True)

    return _checked(sample, events, where, context, problems, True)


def _checked(
    sample: Any,
    events: Callable[[], Iterator[Any]],
    where: Member,
    context: EvalContext,
    problems: list[Problem],
    streamed: bool,
) -> ParsedTrial | None:
    """The sample's trial, or None (and an error naming the member and field) when it is not an EvalSample."""
    if not isinstance(sample, dict):
        _rejected(where, f"{where.name}: a sample must be a JSON object (EvalSample)", problems)
        return None
    for field, types, what in _REQUIRED:
        if not isinstance(sample.get(field), types) or isinstance(sample.get(field), bool):
            _rejected(
                where, f"{where.name}: not an EvalSample: `{field}` must be {what}", problems, f"{where.name}#{field}"
            )
            return None
    for field, types, what in _OPTIONAL:
        if sample.get(field) is not None and not isinstance(sample[field], types):
            _rejected(
                where, f"{where.name}: not an EvalSample: `{field}` must be {what}", problems, f"{where.name}#{field}"
            )
            return None
    return sample_trial(sample, events, where, context, streamed)


_Field = tuple[str, type | tuple[type, ...], str]
_REQUIRED: tuple[_Field, ...] = (
    ("id", (int, str), "a string or an integer"),
    ("epoch", int, "an integer"),
    ("input", (str, list), "a string or a list of messages"),
)
_OPTIONAL: tuple[_Field, ...] = (
    ("target", (str, list), "a string or a list of strings"),
    ("events", list, "a list of events"),
    ("scores", dict, "an object of scores by scorer"),
    ("error", dict, "an EvalError object"),
    ("limit", dict, "an EvalSampleLimit object"),
    ("model_usage", dict, "an object of usage by model"),
    ("attachments", dict, "an object of texts by hash"),
)


# ---------------------------------------------------------------- a cut-off .eval


def _parse_cut_off(path: Path, rel: str, budget: Budget, refused: str = "") -> ParsedPack:
    """A ZIP with no central directory (the writer stopped, the copy was cut), or one zipfile refuses
    (`refused` says why): its members in order, from their local headers."""
    problems: list[Problem] = []
    header: dict[str, Any] = {}
    samples = 0
    cut = stopped = ""
    try:
        for name, data in local_members(path, budget):
            if data is None:
                cut = name
                break
            if name in FIRST_MEMBERS and not header or name == "header.json":
                header = as_dict(_loads(data))
            samples += bool(SAMPLE.match(name))
    except OverLimit as exc:  # (the second pass names the limit: it stops there too)
        cut, stopped = exc.member, exc.message
    if not header and not samples:
        why = refused or "no central directory"
        message = f"not a readable .eval archive: {why} and no whole member" + (
            f" ({cut}: {stopped})" if stopped else ""
        )
        raise PackError(Problem(rel, message, cut, kept="the raw bytes"))
    if refused:
        message = f"the .eval archive is read from its local headers: {refused}"
        kept = f"the raw bytes; the {samples} samples read from the local headers are imported"
    else:
        where = f"the file ends inside member {cut}" if cut else "the file ends after its last whole member"
        where = f"reading stops at member {cut}, past a limit" if stopped else where
        message = f"the .eval archive is cut off: no central directory ({where})"
        kept = f"the raw bytes; the {samples} whole samples before the cut are imported"
    problems.append(Problem(rel, message, cut, kept=kept))
    job, context = _job(header, rel, problems)
    pack = ParsedPack(kind=KIND, jobs=[job], problems=problems, trial_count=samples)
    pack.trials = _cut_off_trials(path, context, pack.problems, budget)
    return pack


def _loads(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None


def _cut_off_trials(path: Path, context: EvalContext, problems: list[Problem], budget: Budget) -> Iterator[ParsedTrial]:
    done = 0
    try:
        for name, data in local_members(path, budget):
            if data is None:
                return
            if SAMPLE.match(name):
                trial = _whole_sample(partial(bytes, data), Member(context.rel, name, len(data)), context, problems)
                done += 1
                if trial is not None:
                    yield trial
    except OverLimit as exc:  # (from the local headers, a member past a limit ends the reading: its end is unknown)
        problems.append(_over_limit(context.rel, exc, done, stops=True))


# ---------------------------------------------------------------- .json


def parse_json_log(path: Path, rel: str) -> ParsedPack:
    problems: list[Problem] = []
    if path.stat().st_size <= STREAM_THRESHOLD:
        try:
            data = orjson.loads(path.read_bytes().removeprefix(b"\xef\xbb\xbf"))
        except orjson.JSONDecodeError as exc:
            raise PackError(malformed(rel, exc)) from exc
        if not is_json_log(data):
            raise PackError(Problem(rel, "not an Inspect log: needs `version` and `eval.task`", kept="the raw bytes"))
        job, context = _job(data, rel, problems)
        samples = as_list(data.get("samples"))
        pack = ParsedPack(kind=KIND, jobs=[job], problems=problems, trial_count=len(samples))
        pack.trials = _listed_trials(iter(samples), context, pack.problems, size=0)  # (held whole already)
        return pack
    try:
        with open_json(path) as stream:
            header = top_level(stream, skip=("samples", "reductions"))
    except ijson.JSONError as exc:
        raise PackError(Problem(rel, f"malformed JSON: {exc}", kept="the raw bytes")) from exc
    job, context = _job(header, rel, problems)
    pack = ParsedPack(kind=KIND, jobs=[job], problems=problems)
    pack.trials = _listed_trials(_stream_samples(path, rel, pack.problems), context, pack.problems)
    return pack


def _stream_samples(path: Path, rel: str, problems: list[Problem]) -> Iterator[Any]:
    try:
        with open_json(path) as stream:
            yield from ijson.items(stream, "samples.item", use_float=True)
    except ijson.JSONError as exc:
        problems.append(
            Problem(
                rel,
                f"malformed JSON in samples: {exc}",
                "samples",
                kept="the raw bytes; the samples before it are imported",
            )
        )


def _listed_trials(
    samples: Iterator[Any], context: EvalContext, problems: list[Problem], size: int | None = None
) -> Iterator[ParsedTrial]:
    for index, sample in enumerate(samples):
        where = Member(context.rel, f"samples[{index}]", size)
        events = as_list(as_dict(sample).get("events"))
        trial = _checked(sample, partial(iter, events), where, context, problems, False)
        if trial is not None:
            yield trial
