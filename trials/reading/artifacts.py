"""Artifacts previewed on the trial page: text and JSON shown as text, images inline, up to a cap."""

from __future__ import annotations

import mimetypes
from dataclasses import dataclass
from pathlib import PurePosixPath

import orjson

from trials.ingest import redaction
from trials.ingest.formats.terminal_bench import RECORDING_KIND
from trials.models import Artifact, Trial
from trials.reading.text import pretty_json, scrub

PREVIEW_BYTES = 256 * 1024  # larger artifacts are downloaded, not previewed
RECORDING_BYTES = 50 * 1024 * 1024  # terminal recordings up to this size play in the page (read whole to scrub)
PREVIEWS_PER_PAGE = 20  # the tab reads at most this many blobs
OPEN_PREVIEWS = 3
IMAGE_TYPES = {"image/png", "image/jpeg", "image/gif", "image/webp"}  # (no SVG: it can carry script)


@dataclass
class ArtifactRow:
    artifact: Artifact
    kind: str = ""  # "text", "json", "image", or "" when there is no preview
    text: str = ""
    why_not: str = ""  # why there is no preview, when there is none
    open: bool = False  # shown open: the first recording, and the first few other previews


def file_name(artifact: Artifact) -> str:
    return PurePosixPath(artifact.destination or artifact.source).name or f"artifact-{artifact.pk}"


def image_type(artifact: Artifact) -> str | None:
    """The image media type an artifact is served inline as, or None."""
    guessed = mimetypes.guess_type(file_name(artifact))[0]
    return guessed if guessed in IMAGE_TYPES else None


def artifact_rows(trial: Trial, artifacts: list[Artifact]) -> list[ArtifactRow]:
    """Each artifact with its preview: the first PREVIEWS_PER_PAGE small ones are read.

    An artifact's bytes are stored as imported, so a preview is scrubbed here by the trial's
    redactions (as the import scrubs its logs), then masked like any text.
    """
    rows = []
    named: dict[str, dict] | None = None
    read = 0
    for artifact in artifacts:
        row = ArtifactRow(artifact)
        rows.append(row)
        blob = artifact.blob
        if blob is None:
            row.why_not = "bytes not in pack"
        elif is_recording(artifact):
            row.kind = "asciicast"
        elif blob.size > PREVIEW_BYTES:
            row.why_not = "too large to preview"
        elif image_type(artifact):
            row.kind = "image"
        elif read >= PREVIEWS_PER_PAGE:
            row.why_not = f"only the first {PREVIEWS_PER_PAGE} are previewed"
        else:
            read += 1
            named = trial.redactions() if named is None else named
            row.kind, row.text = _text_preview(blob.read(), file_name(artifact), named)
            row.why_not = "" if row.kind else "not text (or not UTF-8) and not an image"
    # One recording open (each is a terminal's height; the others play when opened), three other previews.
    recordings = [row for row in rows if row.kind == "asciicast"]
    others = [row for row in rows if row.kind and row.kind != "asciicast"]
    for row in recordings[:1] + others[:OPEN_PREVIEWS]:
        row.open = True
    return rows


def is_recording(artifact: Artifact) -> bool:
    """A terminal recording (asciicast) small enough to play in the page."""
    return artifact.kind == RECORDING_KIND and artifact.blob is not None and artifact.blob.size <= RECORDING_BYTES


def recording_text(trial: Trial, artifact: Artifact) -> str:
    """A recording's asciicast lines, scrubbed as a preview is: the trial's redactions, then masking.

    Each line is a JSON array; masking replaces a token inside a string by `[redacted]`, so it stays JSON."""
    assert artifact.blob is not None  # (is_recording: only a stored recording is played)
    return scrub(redaction.scrub_file(artifact.blob.read(), trial.redactions()).decode("utf-8", "replace"))


def _text_preview(data: bytes, name: str, named: dict[str, dict]) -> tuple[str, str]:
    data = redaction.scrub_file(data, named)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "", ""
    if "\x00" in text:  # decodes, but is binary
        return "", ""
    if name.lower().endswith(".json"):
        try:
            return "json", pretty_json(orjson.loads(data))
        except orjson.JSONDecodeError:
            pass
    return "text", scrub(text)
