"""What Benchviewer stores: raw bytes (Blob, PackFile) and the rows that index them.

Raw bytes are the source of truth. Every other table is an index for pages,
filters and aggregates, and keeps what it has no column for in a JSON field.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import orjson
from django.conf import settings
from django.contrib.postgres.search import SearchVectorField
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.urls import reverse

from trials.ingest import agentv, atif
from trials.ingest.atif import EMBEDDED_MARK
from trials.ingest.records import ParsedStep

_NUL_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")


class NulSafeJSONEncoder(DjangoJSONEncoder):
    """PostgreSQL's jsonb refuses \\u0000, which agent output can contain: store U+FFFD instead.

    The raw bytes of every file keep the original; only the index loses the NUL.
    """

    def encode(self, o):
        try:
            text = orjson.dumps(o).decode()  # an order of magnitude faster than json.dumps
        except TypeError:
            text = super().encode(o)
        return _NUL_ESCAPE.sub(r"\1\\ufffd", text) if "\\u0000" in text else text


def parse_pk(value: Any) -> int | None:
    """A row id as a URL or a form writes it: ASCII digits that fit a 64-bit column; else None.
    (`str.isdigit` also takes "²", which `int` refuses, and any length.)"""
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 18:
        return int(value)
    return None


def nul_free(text: str) -> str:
    """PostgreSQL text columns refuse NUL characters (see NulSafeJSONEncoder)."""
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


class NulFreeText:
    """Text fields whose values lose their NUL characters on the way to the database.

    Every string an import writes comes from an agent or a producer and may hold NUL.
    The column itself is Django's own (see `deconstruct`), so no migration changes.
    """

    def get_prep_value(self, value):
        value = super().get_prep_value(value)
        return nul_free(value) if isinstance(value, str) else value

    def deconstruct(self):
        name, _, args, kwargs = super().deconstruct()
        return name, f"django.db.models.{type(self).__name__}", args, kwargs


class CharField(NulFreeText, models.CharField):
    pass


class TextField(NulFreeText, models.TextField):
    pass


class JSONField(models.JSONField):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("encoder", NulSafeJSONEncoder)
        super().__init__(*args, **kwargs)


class Blob(models.Model):
    """Content-addressed bytes: the same content is stored once, whoever imports it."""

    sha256 = CharField(max_length=64, unique=True)
    size = models.BigIntegerField()
    # Small files are stored together (trials.blobs.store_pack): the storage name of the pack
    # object holding these bytes, from `offset`. Blank: in a file of their own.
    pack = CharField(max_length=60, blank=True, db_index=True)  # (indexed: trials.blobs.remove_unnamed_packs)
    offset = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.sha256[:12]} ({self.size} B)"

    @property
    def storage_name(self) -> str:
        """The name of the object in the storage that holds these bytes (a pack, or their own)."""
        return self.pack or f"{self.sha256[:2]}/{self.sha256[2:4]}/{self.sha256}"

    def open(self):
        from trials.blobs import open_blob

        return open_blob(self)

    def read(self) -> bytes:
        with self.open() as f:
            return f.read()


class Import(models.Model):
    """One request to import: an upload, an API call or a CLI path. Runs as a Celery task."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    class Origin(models.TextChoices):
        UPLOAD = "upload"
        API = "api"
        CLI = "cli"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    origin = CharField(max_length=10, choices=Origin.choices)
    source_name = CharField(max_length=500)  # file name or path as the user gave it
    source_path = CharField(max_length=2000, blank=True)  # CLI: a path on this machine
    upload = models.ForeignKey(Blob, null=True, blank=True, on_delete=models.PROTECT)
    status = CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    # One line per pack: {"pack": path, "kind": ..., "outcome": imported|already imported|rejected, ...}
    outcomes = JSONField(default=list)
    problems = JSONField(default=list)  # Problem.as_dict() entries
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.source_name} ({self.status})"

    def get_absolute_url(self) -> str:
        return reverse("import-detail", args=[self.pk])

    @property
    def rejected_count(self) -> int:
        return sum(1 for o in self.outcomes if o.get("outcome") == "rejected" or o.get("rejected"))

    @property
    def nothing_new(self) -> bool:
        """Done, and every pack was already imported: a re-import, told apart from the first one."""
        packs = [o for o in self.outcomes if o.get("outcome") not in ("skipped", "extracted")]
        return (
            self.status == self.Status.DONE and bool(packs) and all(o["outcome"] == "already imported" for o in packs)
        )

    @property
    def has_trials(self) -> bool:
        """Did any pack bring, find or join a trial? (A wholly rejected upload has none to list.)"""
        return any(o.get(k) for o in self.outcomes for k in ("trials", "already", "joined"))

    @property
    def worker_gone(self) -> bool:
        """Running, but no worker holds it: killed, out of memory, its machine lost (trials/recovery.py)."""
        from trials import recovery

        return self.status == self.Status.RUNNING and bool(recovery.unheld([str(self.pk)]))

    def pack_ids(self) -> set[int]:
        """The packs this import read: the ones it stored first, and the ones it found already stored."""
        named = {o["pack_id"] for o in self.outcomes if isinstance(o.get("pack_id"), int)}
        return named | set(Pack.objects.filter(first_import=self).values_list("pk", flat=True))


class Pack(models.Model):
    """A detected trial pack (a job dir, a trial dir, a JSON or JSONL file), stored whole.

    `sha256` is the hash of its content (for a folder, of its sorted file list and
    file hashes), so importing the same pack again finds this row and adds nothing.
    """

    class Status(models.TextChoices):
        IMPORTING = "importing"  # rows are being written; a re-import finishes the job
        IMPORTED = "imported"
        REJECTED = "rejected"  # bytes kept, nothing could be read from them

    sha256 = CharField(max_length=64, unique=True)
    kind = CharField(max_length=40)
    name = CharField(max_length=500)
    status = CharField(max_length=10, choices=Status.choices, default=Status.IMPORTING)
    first_import = models.ForeignKey(Import, null=True, on_delete=models.SET_NULL)
    problems = JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)
    # Trials this pack holds that another pack brought in first, or that its evidence joined.
    other_trials = models.ManyToManyField("Trial", related_name="also_in_packs", blank=True)

    def __str__(self) -> str:
        return f"{self.kind}: {self.name}"

    def all_trials(self) -> models.QuerySet:
        return Trial.objects.held_by([self.pk])


class PackFile(models.Model):
    pack = models.ForeignKey(Pack, on_delete=models.CASCADE, related_name="files")
    path = CharField(max_length=1000)
    blob = models.ForeignKey(Blob, on_delete=models.PROTECT)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["pack", "path"], name="unique_pack_path")]

    def __str__(self) -> str:
        return self.path


class Dataset(models.Model):
    name = CharField(max_length=300)
    version = CharField(max_length=100, blank=True)
    ref = CharField(max_length=500, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["name", "version"], name="unique_dataset_version")]
        ordering = ["name", "version"]

    def __str__(self) -> str:
        return f"{self.name}@{self.version}" if self.version else self.name


class Configuration(models.Model):
    class Role(models.TextChoices):
        BASELINE = "baseline"
        CANDIDATE = "candidate"
        CONTROL = "control"
        NONE = "", "unassigned"

    key = CharField(max_length=300, unique=True)
    role = CharField(max_length=20, choices=Role.choices, blank=True, db_index=True)
    agent_name = CharField(max_length=200, blank=True)
    agent_version = CharField(max_length=100, blank=True)
    model_name = CharField(max_length=200, blank=True)
    profiles = JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["key"]

    def __str__(self) -> str:
        return f"{self.key} ({self.role})" if self.role else self.key


class JobQuerySet(models.QuerySet):
    # A Harbor job's result.json names every trial (0.5 MB at 5,000 trials): lists of jobs,
    # and of trials with their job, never load these (bench/README.md, "Scale").
    DOCUMENT_FIELDS = ("config", "result", "extra")

    def for_list(self):
        return self.defer(*self.DOCUMENT_FIELDS)


class Job(models.Model):
    """A run container: a Harbor job, an AgentV run, an OpenChrome envelope, a QC experiment."""

    key = CharField(max_length=300, unique=True)
    name = CharField(max_length=300)
    source_format = CharField(max_length=20)
    pack = models.ForeignKey(Pack, null=True, on_delete=models.SET_NULL)
    started_at = models.DateTimeField(null=True, blank=True)
    started_as_written = CharField(max_length=40, blank=True)  # a start with no time zone, never read as UTC
    finished_at = models.DateTimeField(null=True, blank=True)
    config = JSONField(default=dict, blank=True)
    result = JSONField(default=dict, blank=True)
    extra = JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = JobQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("job-detail", args=[self.pk])

    def claim_eligibility(self) -> list[dict]:
        """OpenChrome's headline decision, one per result entry that makes one (seed 003)."""
        entries = self.extra.get("results") if isinstance(self.extra, dict) else None
        return [
            {"suite": entry.get("suite") or "", **entry["claimEligibility"]}
            for entry in entries or []
            if isinstance(entry, dict) and isinstance(entry.get("claimEligibility"), dict)
        ]


class Task(models.Model):
    dataset = models.ForeignKey(Dataset, null=True, on_delete=models.PROTECT)
    name = CharField(max_length=300)
    checksum = CharField(max_length=128, blank=True)
    source = CharField(max_length=1000, blank=True)
    definition = JSONField(default=dict, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["dataset", "name", "checksum"], name="unique_task_checksum")]
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class TrialQuerySet(models.QuerySet):
    def for_list(self):
        return self.select_related("task", "configuration", "dataset", "job").defer(
            *(f"job__{name}" for name in JobQuerySet.DOCUMENT_FIELDS)
        )

    def failed(self):
        return self.filter(status__in=Trial.FAILED_STATUSES)

    def untriaged(self):
        """Failed trials no QC item has been filed on: the triage queue."""
        return self.failed().filter(qc_items__isnull=True)

    def held_by(self, pack_ids):
        """The trials of these packs: the ones they brought, and the ones they found already there."""
        also = Pack.other_trials.through.objects.filter(pack_id__in=pack_ids).values("trial_id")
        return self.filter(models.Q(pack_id__in=pack_ids) | models.Q(pk__in=also))


class Trial(models.Model):
    class Status(models.TextChoices):
        PASSED = "passed"
        FAILED = "failed"
        ERRORED = "errored"
        TIMEOUT = "timeout"
        SKIPPED = "skipped"
        UNKNOWN = "unknown"

    FAILED_STATUSES = ("failed", "errored", "timeout")

    key = CharField(max_length=500, unique=True)
    # What its files were (trials.services.files_sha256): a re-import of the trial from other
    # bytes is told apart from the same trial again. Blank for trials of shared files (AgentV).
    files_sha256 = CharField(max_length=64, blank=True)
    source_format = CharField(max_length=20, db_index=True)
    name = CharField(max_length=300)
    pack = models.ForeignKey(Pack, null=True, on_delete=models.SET_NULL, related_name="trials")
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.CASCADE, related_name="trials")
    dataset = models.ForeignKey(Dataset, null=True, blank=True, on_delete=models.PROTECT)
    task = models.ForeignKey(Task, null=True, blank=True, on_delete=models.PROTECT)
    configuration = models.ForeignKey(
        Configuration, null=True, blank=True, on_delete=models.PROTECT, related_name="trials"
    )
    attempt = models.PositiveIntegerField(null=True, blank=True)
    status = CharField(max_length=10, choices=Status.choices, default=Status.UNKNOWN)
    reward = models.FloatField(null=True, blank=True)
    rewards = JSONField(default=dict, blank=True)
    exception_type = CharField(max_length=200, blank=True)
    exception_message = TextField(blank=True)
    exception_traceback = TextField(blank=True)
    failure_category = CharField(max_length=60, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_sec = models.FloatField(null=True, blank=True)
    phases = JSONField(default=dict, blank=True)
    input_tokens = models.BigIntegerField(null=True, blank=True)
    cached_tokens = models.BigIntegerField(null=True, blank=True)
    output_tokens = models.BigIntegerField(null=True, blank=True)
    cost_usd = models.FloatField(null=True, blank=True)
    step_count = models.PositiveIntegerField(default=0)
    tool_call_count = models.PositiveIntegerField(default=0)
    step_text_indexed = models.BooleanField(default=False)  # its steps are in the search index (trials/search.py)
    # Joinability: which evidence parts the pack has, and whether it can be trusted.
    is_complete = models.BooleanField(default=False)
    missing = JSONField(default=list, blank=True)
    session_id = CharField(max_length=200, blank=True, db_index=True)
    run_id = CharField(max_length=200, blank=True, db_index=True)
    benchmark = JSONField(default=dict, blank=True)
    runtime_correlation = JSONField(default=dict, blank=True)
    refs = JSONField(default=dict, blank=True)
    provenance = JSONField(default=dict, blank=True)
    documents = JSONField(default=dict, blank=True)  # result.json, config.json… as parsed
    texts = JSONField(default=dict, blank=True)  # logs, stdout, exception.txt (path -> text)
    ctrf_tests = JSONField(default=list, blank=True)
    problems = JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)  # a later join or re-score: cached comparisons go stale

    objects = TrialQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "name"]
        indexes = [
            models.Index(fields=["job", "task"]),
            models.Index(fields=["configuration", "task"]),
            models.Index(fields=["dataset", "status"]),
            models.Index(fields=["status", "failure_category"]),
            models.Index(fields=["reward"]),
        ]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("trial-detail", args=[self.pk])

    @property
    def is_failure(self) -> bool:
        return self.status in self.FAILED_STATUSES


class Trajectory(models.Model):
    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="trajectories")
    path = CharField(max_length=1000)
    role = CharField(max_length=20)  # main | continuation | subagent | user-agent | step
    step_name = CharField(max_length=200, blank=True)
    position = models.PositiveIntegerField(default=0)
    blob = models.ForeignKey(Blob, null=True, on_delete=models.PROTECT)
    # Where each step's JSON is (a step keeps its place in it): the file itself (`blob`), when the
    # importer could tell where each step lies in it, or a copy, one step after another (trials.blobs.StepBodies).
    step_bodies = models.ForeignKey(Blob, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    # A redaction withheld values in it (trials.ingest.harbor.withhold_redacted): its header and step
    # bodies are scrubbed copies, and its ATIF is made of them, never the file's bytes.
    withheld = models.BooleanField(default=False)
    schema_version = CharField(max_length=40, blank=True)
    session_id = CharField(max_length=200, blank=True)
    trajectory_id = CharField(max_length=200, blank=True)
    agent = JSONField(default=dict, blank=True)
    final_metrics = JSONField(null=True, blank=True)
    header = JSONField(default=dict, blank=True)
    step_count = models.PositiveIntegerField(default=0)
    # The largest prompt + completion of one step: token bars share one scale over the whole file.
    max_step_tokens = models.BigIntegerField(null=True, blank=True)
    problems = JSONField(default=list, blank=True)

    class Meta:
        ordering = ["trial", "position"]

    def __str__(self) -> str:
        return self.path

    @property
    def is_valid(self) -> bool:
        return not any(p.get("severity") == "error" for p in self.problems)

    def withheld_atif(self) -> Iterator[bytes]:
        """The ATIF JSON of a `withheld` trajectory, in pieces: its scrubbed header and step bodies."""
        from trials.blobs import open_blob

        header = orjson.dumps(self.header)
        yield header[:-1] + (b"," if len(header) > 2 else b"") + b'"steps":['
        if self.step_bodies_id is not None:
            with open_blob(self.step_bodies) as bodies:
                places = self.steps.order_by("index").values_list("body_offset", "size")
                for number, (offset, size) in enumerate(places.iterator()):
                    bodies.seek(offset)
                    yield (b"," if number else b"") + bodies.read(size)
        yield b"]}"

    def atif_bytes(self) -> bytes:
        """The ATIF JSON of this trajectory: its file's bytes, or an embedded subagent's object in its parent's."""
        data = self.blob.read()
        _, embedded, index = self.path.partition(EMBEDDED_MARK)
        if not embedded:
            return data
        return orjson.dumps(orjson.loads(data)["subagent_trajectories"][int(index.strip("[]"))])

    def read_step(self, raw: Any, index: int) -> ParsedStep:
        """One of its stored step bodies, read as the importer read it: an AgentV output message or an ATIF step."""
        if agentv.is_output_trajectory(self.path):
            return agentv.message_step(raw, index)
        return atif.parse_step(raw, index)


class Step(models.Model):
    trajectory = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="steps")
    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="steps")
    index = models.PositiveIntegerField()  # position in the file, 0-based
    step_id = CharField(max_length=40)  # as written; ATIF says index + 1
    source = CharField(max_length=10)
    timestamp = models.DateTimeField(null=True, blank=True)
    model_name = CharField(max_length=200, blank=True)
    message_text = TextField(blank=True)
    reasoning = TextField(blank=True)
    prompt_tokens = models.BigIntegerField(null=True, blank=True)
    completion_tokens = models.BigIntegerField(null=True, blank=True)
    cached_tokens = models.BigIntegerField(null=True, blank=True)
    cost_usd = models.FloatField(null=True, blank=True)
    is_copied_context = models.BooleanField(default=False)
    llm_call_count = models.IntegerField(null=True, blank=True)
    context_management = CharField(max_length=20, blank=True)
    tool_call_count = models.PositiveIntegerField(default=0)
    body_offset = models.BigIntegerField(default=0)  # where the step's JSON starts in trajectory.step_bodies
    size = models.PositiveIntegerField(default=0)  # bytes of the step's JSON

    class Meta:
        ordering = ["trajectory", "index"]
        constraints = [models.UniqueConstraint(fields=["trajectory", "index"], name="unique_step_index")]
        indexes = [models.Index(fields=["trial", "trajectory", "index"])]

    def __str__(self) -> str:
        return f"step {self.step_id}"

    @property
    def raw(self) -> dict:
        """The step as in its file (parsed again from its JSON: the file's own bytes, or orjson's copy)."""
        return orjson.loads(self.body())

    def body(self) -> bytes:
        from trials.blobs import read_range

        return read_range(self.trajectory.step_bodies, self.body_offset, self.size)


class StepText(models.Model):
    """What a search of a step looks in: its message, reasoning, tool calls and observations, lower-cased.

    Written once, after the import, by the indexing task (trials/search.py). A table of its
    own, so indexing only inserts: filling a column of the step table updated every step
    row (on PostgreSQL a dead row version each), and made the rows the trial page reads wide.
    """

    step = models.OneToOneField(Step, primary_key=True, on_delete=models.CASCADE, related_name="search_text")
    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="+")
    text = TextField(blank=True)

    def __str__(self) -> str:
        return f"search text of step {self.step_id}"


class StepWords(models.Model):
    """The distinct words of a step's search text: PostgreSQL's step index (trials/search.py).

    Filled after the import. A step with too many distinct words for a tsvector gets
    one word that every search asks for, so it is always scanned. SQLite uses an FTS5
    table instead.
    """

    step = models.OneToOneField(Step, primary_key=True, on_delete=models.CASCADE, related_name="+")
    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="+")
    words = SearchVectorField()

    class Meta:
        verbose_name_plural = "step words"

    def __str__(self) -> str:
        return f"words of step {self.step_id}"


class ToolCall(models.Model):
    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="tool_calls")
    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="tool_calls")
    tool_call_id = CharField(max_length=200, db_index=True)
    function_name = CharField(max_length=200, db_index=True)
    arguments = JSONField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.function_name} ({self.tool_call_id})"


class ObservationResult(models.Model):
    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="observations")
    source_call_id = CharField(max_length=200, blank=True)
    content_size = models.PositiveIntegerField(default=0)
    preview = TextField(blank=True)
    subagent_refs = JSONField(default=list, blank=True)

    def __str__(self) -> str:
        return f"result of {self.source_call_id or 'step'}"

    @property
    def is_cut(self) -> bool:
        """Is the preview shorter than the content? (content_size counts UTF-8 bytes, not characters)"""
        return self.content_size > len(self.preview.encode("utf-8", "surrogatepass"))


class PermissionDecision(models.Model):
    class Decision(models.TextChoices):
        APPROVE = "approve"
        DENY = "deny"
        EDIT = "edit"
        PENDING = "pending"

    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="permissions")
    action_id = CharField(max_length=200)
    tool_call_id = CharField(max_length=200, blank=True, db_index=True)
    step_id = CharField(max_length=40, blank=True)
    action_type = CharField(max_length=100, blank=True)
    tool_name = CharField(max_length=200, blank=True)
    scope = JSONField(default=dict, blank=True)
    prompt = TextField(blank=True)
    decision = CharField(max_length=10, choices=Decision.choices)
    decided_by = CharField(max_length=200, blank=True)
    reason = TextField(blank=True)
    side_effect_after_denial = models.BooleanField(default=False)
    requested_at = models.DateTimeField(null=True, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    raw = JSONField(default=dict, blank=True)

    def __str__(self) -> str:
        return f"{self.action_id}: {self.decision}"


class ContextRecord(models.Model):
    """An Agent Context fact. Redacted raw values are scrubbed before they get here."""

    trial = models.ForeignKey(Trial, null=True, blank=True, on_delete=models.CASCADE, related_name="context_records")
    pack = models.ForeignKey(Pack, null=True, on_delete=models.SET_NULL)
    kind = CharField(max_length=20, db_index=True)
    record_id = CharField(max_length=300)
    context_id = CharField(max_length=200, blank=True)
    status = CharField(max_length=20, blank=True, db_index=True)
    reason = TextField(blank=True)
    redaction_state = CharField(max_length=30, blank=True)
    step_id = CharField(max_length=40, blank=True)
    tool_call_id = CharField(max_length=200, blank=True)
    correlation = JSONField(default=dict, blank=True)
    data = JSONField(default=dict, blank=True)

    def __str__(self) -> str:
        return f"{self.kind} {self.record_id}"


class Artifact(models.Model):
    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="artifacts")
    source = CharField(max_length=1000)
    destination = CharField(max_length=1000, blank=True)
    kind = CharField(max_length=20, blank=True)
    status = CharField(max_length=20, blank=True)
    service = CharField(max_length=100, blank=True)
    blob = models.ForeignKey(Blob, null=True, blank=True, on_delete=models.PROTECT)
    raw = JSONField(default=dict, blank=True)

    def __str__(self) -> str:
        return self.destination or self.source


class RewardCriterion(models.Model):
    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="criteria")
    name = CharField(max_length=300)
    score = models.FloatField(null=True, blank=True)
    weight = models.FloatField(null=True, blank=True)
    reasoning = TextField(blank=True)
    evidence_refs = JSONField(default=list, blank=True)
    raw = JSONField(default=dict, blank=True)

    def __str__(self) -> str:
        return self.name


class RuntimeEvent(models.Model):
    trial = models.ForeignKey(Trial, null=True, blank=True, on_delete=models.CASCADE, related_name="events")
    pack = models.ForeignKey(Pack, null=True, on_delete=models.SET_NULL)
    type = CharField(max_length=100, db_index=True)
    event_id = CharField(max_length=200, blank=True, db_index=True)
    timestamp = models.DateTimeField(null=True, blank=True)
    sequence = models.BigIntegerField(null=True, blank=True)
    session_id = CharField(max_length=200, blank=True, db_index=True)
    run_id = CharField(max_length=200, blank=True, db_index=True)
    correlation = JSONField(default=dict, blank=True)
    payload = JSONField(default=dict, blank=True)
    refs = JSONField(default=dict, blank=True)
    raw = JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["sequence", "timestamp", "pk"]

    def __str__(self) -> str:
        return self.type


class Document(models.Model):
    """Evidence that is not a trial: QC manifests and verdicts, schemas, task.toml, traces."""

    pack = models.ForeignKey(Pack, on_delete=models.CASCADE, related_name="documents")
    kind = CharField(max_length=60, db_index=True)
    path = CharField(max_length=1000)
    title = CharField(max_length=500, blank=True)
    data = JSONField(null=True, blank=True)
    counts = JSONField(default=dict, blank=True)

    def __str__(self) -> str:
        return f"{self.kind}: {self.title or self.path}"


# The QC models live beside their views in trials/triage/; importing them here registers them.
from trials.triage.models import *  # noqa: E402, F403
