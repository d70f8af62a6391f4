"""Trajectories and their steps (bodies stay in blobs), tool calls, observations, the search text."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import orjson
from django.contrib.postgres.search import SearchVectorField
from django.db import models

from trials.ingest.formats import agentv, agentv_messages, atif
from trials.ingest.formats.atif import EMBEDDED_MARK
from trials.ingest.records import ParsedStep
from trials.models.imports import Blob
from trials.models.trial import Trial
from trials.storage.backend import read_range
from trials.storage.fields import CharField, JSONField, TextField


class Trajectory(models.Model):
    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="trajectories")
    path = CharField(max_length=1000)
    role = CharField(max_length=20)  # main | continuation | subagent | user-agent | step
    step_name = CharField(max_length=200, blank=True)
    position = models.PositiveIntegerField(default=0)
    blob = models.ForeignKey(Blob, null=True, on_delete=models.PROTECT)
    # Where each step's JSON is (a step keeps its place in it): the file itself (`blob`), when the
    # importer could tell where each step lies in it, or a copy, one step after another
    # (trials.imports.blobs.StepBodies).
    step_bodies = models.ForeignKey(Blob, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    # A redaction withheld values in it (trials.ingest.redaction.withhold_redacted): its header and step
    # bodies are scrubbed copies, and its ATIF is made of them, never the file's bytes.
    withheld = models.BooleanField(default=False)
    # Made by Benchviewer from the trial's runtime events (trials/live/derive.py), not written by the agent.
    derived = models.BooleanField(default=False)
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
        return (piece for _, piece in self.atif_pieces())

    def atif_pieces(self) -> Iterator[tuple[int | None, bytes]]:
        """ATIF JSON made of its header and step bodies: (step index, its body) or (None, the JSON between)."""
        header = orjson.dumps(self.header)
        yield None, header[:-1] + (b"," if len(header) > 2 else b"") + b'"steps":['
        for number, (index, body) in enumerate(self.bodies()):
            if number:
                yield None, b","
            yield index, body
        yield None, b"]}"

    def bodies(self) -> Iterator[tuple[int, bytes]]:
        """(index, JSON) of each of its steps in order, wherever each body is (`step_bodies` or a segment)."""
        places = list(self.steps.order_by("index").values_list("index", "segment_id", "body_offset", "size"))
        read = read_bodies([(segment or self.step_bodies_id, offset, size) for _, segment, offset, size in places])
        return zip((place[0] for place in places), read, strict=True)

    def atif_bytes(self) -> bytes:
        """The ATIF JSON of this trajectory: its file's bytes, or an embedded subagent's object in its parent's."""
        assert self.blob is not None  # (the API serves ATIF only of a trajectory read from a file)
        data = self.blob.read()
        _, embedded, index = self.path.partition(EMBEDDED_MARK)
        if not embedded:
            return data
        return orjson.dumps(orjson.loads(data)["subagent_trajectories"][int(index.strip("[]"))])

    def read_step(self, raw: Any, index: int) -> ParsedStep:
        """One of its stored step bodies, read as the importer read it: an AgentV output message or an ATIF step."""
        if agentv.is_output_trajectory(self.path):
            return agentv_messages.message_step(raw, index)
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
    skill = CharField(max_length=200, blank=True)  # the agent skill it ran within (OTLP's `gen_ai.skill.name`)
    tool_call_count = models.PositiveIntegerField(default=0)
    body_offset = models.BigIntegerField(default=0)  # where the step's JSON starts in trajectory.step_bodies
    # While a live trial runs: the blob its POST appended (a POST writes its own steps, not the whole
    # trajectory again); its bodies move into `trajectory.step_bodies` when the trial completes.
    segment = models.ForeignKey(Blob, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    size = models.PositiveIntegerField(default=0)  # bytes of the step's JSON
    # What aligns it with another trial's step (trials.ingest.signatures): what may pair it, what makes
    # the pair the same, and the signature of its whole prefix (a search on it finds the first divergence).
    align_key = CharField(max_length=16, blank=True)
    signature = CharField(max_length=16, blank=True)
    chain = CharField(max_length=16, blank=True)

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
        bodies = self.segment if self.segment_id is not None else self.trajectory.step_bodies
        assert bodies is not None  # (the import stores them for every trajectory that has steps)
        return read_range(bodies, self.body_offset, self.size)


def read_bodies(places: Sequence[tuple[int | None, int, int]]) -> Iterator[bytes]:
    """The bytes at each (blob id, offset, size), in order; a blob stays open while the next places are in it."""
    blobs = Blob.objects.in_bulk(sorted({blob_id for blob_id, _, _ in places if blob_id is not None}))
    current, file = None, None
    try:
        for blob_id, offset, size in places:
            assert blob_id is not None  # (the import stores bodies for every trajectory that has steps)
            if file is None or blob_id != current:
                if file is not None:
                    file.close()
                file, current = blobs[blob_id].open(), blob_id
            file.seek(offset)
            yield file.read(size)
    finally:
        if file is not None:
            file.close()


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
    # The agent skill it loads, reads or runs, as its span named it ({name, resource, description, source_uri}).
    skill = JSONField(default=dict, blank=True)

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
