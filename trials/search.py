"""A text index over steps, so a search costs the same however long the trajectory.

It finds the steps that hold every word of the needle, the last one as a prefix; the
step's search text (`StepText`) then confirms the exact substring. So a needle that starts
at a word boundary is found through the index; one with no word in it is found by a scan.
When the index finds nothing, the viewer scans too (`trials.reading.steps.search_steps`), so a needle
inside a word ("rror" in "TypeError") is found, more slowly, and "no match" is always true.
A trigram index would also find needles that start mid-word, but made imports five times
slower (bench/README.md).

- SQLite: an FTS5 word index over `trials_steptext.text` (external content).
- PostgreSQL: `StepWords`, each step's distinct words as a tsvector, with a GIN index.

Both are created by migrations (0004 to 0006, 0013), which keep their own copy of the SQL.

The index and the search text itself are filled after the import, not during it, from the
step bodies (`trials.imports.blobs.StepBodies`): tokenizing the text was half of a big
trajectory's import, and writing the text a third of what was left. Until
`Trial.step_text_indexed`, a search of that trial reads the bodies: slower, and it finds
the needle inside words too, as `?inside=1` does after.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import orjson
from django.db import connection, connections, transaction
from django.db.models.expressions import RawSQL
from django.db.models.signals import post_migrate, pre_delete
from django.dispatch import receiver

from trials.ingest.jsonio import dumps_text
from trials.ingest.records import ParsedStep
from trials.models import Step, StepText, StepWords, Trajectory, Trial
from trials.models.steps import read_bodies
from trials.storage.bulk_insert import insert_rows

WORD = re.compile(r"[^\W_]+")  # what FTS5's unicode61 tokenizer keeps as a token
MAX_WORD = 255  # PostgreSQL keeps longer words cut to this: a prefix query still finds them
MAX_WORDS_BYTES = 512 * 1024  # a tsvector holds at most 1 MB; a step past this is always scanned
CLAIM_BATCH = 200  # trials indexed per transaction: one each was a commit (and an fsync) per trial
CANDIDATES = 2000  # steps a search across trials lists outright (`matching_everywhere`)
TOO_MANY_WORDS = "'_too_many_words_'"  # no WORD has "_": every query asks for this lexeme too


def has_index() -> bool:
    return connection.vendor in ("sqlite", "postgresql")


def index_pending(max_trials: int | None = None) -> int:
    """Add the steps of trials not yet indexed to the index, up to `max_trials` of them.

    Trials go in batches of CLAIM_BATCH, one transaction each; a batch is claimed by the
    transaction that marks it (rows locked with SKIP LOCKED on PostgreSQL, one writer at a
    time on SQLite), so two runs at once never index a trial twice. Returns how many trials
    this call indexed.
    """
    if not has_index():
        return 0
    done = 0
    while max_trials is None or done < max_trials:
        size = CLAIM_BATCH if max_trials is None else min(CLAIM_BATCH, max_trials - done)
        with transaction.atomic():
            pending = Trial.objects.filter(step_text_indexed=False).order_by("pk")
            if connection.features.has_select_for_update_skip_locked:
                pending = pending.select_for_update(skip_locked=True)
            claimed = list(pending.values_list("pk", flat=True)[:size])
            if not claimed:
                break
            Trial.objects.filter(pk__in=claimed).update(step_text_indexed=True)
            _index_steps(claimed, "trial_id")
        done += len(claimed)
    return done


def index_trial(trial) -> None:
    """Put the trial's steps into the index now, unless they are (a live trial: its first steps, or
    after a redaction scrubbed them). The index stays true as later steps come (`index_new_steps`)."""
    if not has_index():
        return
    with transaction.atomic():
        if Trial.objects.filter(pk=trial.pk, step_text_indexed=False).update(step_text_indexed=True):
            _index_steps([trial.pk], "trial_id")
    trial.step_text_indexed = True


def index_new_steps(trial, step_pks: list[int]) -> None:
    """Steps added to a trial (a live trial's POST): indexed with it, so its index costs the new steps only."""
    if not Trial.objects.filter(pk=trial.pk, step_text_indexed=True).exists():
        index_trial(trial)  # (all of them, these too)
    elif has_index():
        for start in range(0, len(step_pks), 500):
            _index_steps(step_pks[start : start + 500], "step_id")


def _index_steps(ids: list[int], column: str) -> None:
    """Search text (and, on PostgreSQL, words) of the steps of these trials (`trial_id`) or these steps
    (`step_id`); on SQLite their rows of the FTS5 table too."""
    steps = Step.objects.filter(trial_id__in=ids) if column == "trial_id" else Step.objects.filter(pk__in=ids)
    _write_search_text(steps)
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO trials_step_fts(rowid, text) SELECT step_id, text FROM trials_steptext"
                f" WHERE {column} IN ({', '.join(['%s'] * len(ids))})",
                ids,
            )


def search_text(step: ParsedStep) -> str:
    """What a search looks in: the step's message, reasoning, tool calls and observations, lower-cased."""
    return step_text(step).lower()


def step_text(step: ParsedStep) -> str:
    """The step's message, reasoning, tool calls and observations as written (a search hit's snippet)."""
    parts = [step.message_text, step.reasoning]
    for call in step.tool_calls:
        parts.append(call.function_name)
        parts.append(dumps_text(call.arguments) if call.arguments is not None else "")
    parts.extend(o.content_text for o in step.observations)
    return "\n".join(parts)


def stored_steps(steps) -> Iterator[tuple[int, int, ParsedStep]]:
    """(pk, trial pk, step) for Step rows, each read again from its stored body as the importer read it."""
    trajectories = Trajectory.objects.filter(pk__in=steps.values("trajectory_id"))
    by_pk = {trajectory.pk: trajectory for trajectory in trajectories}
    # All at once (a few numbers a step), so no cursor stays open on the step table while
    # the caller writes.
    rows = list(
        steps.order_by("trajectory_id", "index").values_list(
            "pk", "trajectory_id", "index", "segment_id", "body_offset", "size"
        )
    )
    places = [(segment or by_pk[pk].step_bodies_id, offset, size) for _, pk, _, segment, offset, size in rows]
    for (pk, trajectory_pk, index, *_), body in zip(rows, read_bodies(places), strict=True):
        trajectory = by_pk[trajectory_pk]
        yield pk, trajectory.trial_id, trajectory.read_step(orjson.loads(body), index)


def _write_search_text(steps) -> None:
    """Each step's search text, from its body; on PostgreSQL its words too, from the same text."""
    texts: list[dict] = []
    words: list[dict] = []
    batch_size = 0
    for pk, trial_pk, step in stored_steps(steps):
        text = search_text(step)
        texts.append({"step_id": pk, "trial_id": trial_pk, "text": text})
        batch_size += len(text)
        if connection.vendor == "postgresql":
            vector = words_vector(text)
            words.append({"step_id": pk, "trial_id": trial_pk, "words": vector})
            batch_size += len(vector)
        if len(texts) >= 2000 or batch_size >= 8 * 1024 * 1024:  # a step's text may be megabytes
            insert_rows(StepText, texts)
            insert_rows(StepWords, words)
            texts, words, batch_size = [], [], 0
    insert_rows(StepText, texts)
    insert_rows(StepWords, words)


def words_vector(text: str) -> str:
    """A tsvector (in its text form) of the text's distinct words, or TOO_MANY_WORDS."""
    words = {word[:MAX_WORD] for word in WORD.findall(text)}
    vector = " ".join(f"'{word}'" for word in words)  # a WORD has no quote or backslash to escape
    return vector if len(vector.encode()) <= MAX_WORDS_BYTES else TOO_MANY_WORDS


def scan(trial, needle: str):
    """The trial's steps whose search text contains `needle` (already lower-cased), wherever it is in a word.

    Before the trial is indexed its search text is not there yet: the bodies are read instead.
    """
    if not trial.step_text_indexed:
        found = [pk for pk, _, step in stored_steps(Step.objects.filter(trial=trial)) if needle in search_text(step)]
        return Step.objects.filter(pk__in=found)
    return Step.objects.filter(trial=trial, search_text__text__contains=needle)


def uses_index(trial, needle: str) -> bool:
    return bool(WORD.search(needle)) and trial.step_text_indexed and has_index()


def matching(trial, needle: str):
    """The trial's steps whose search text contains `needle` (already lower-cased) at a word start.

    Through the index when the trial has been indexed; until then by `scan`, which also
    finds the needle inside words.
    """
    exact = scan(trial, needle)
    words = WORD.findall(needle)
    if not uses_index(trial, needle):
        return exact
    if connection.vendor == "sqlite":
        # Every word of the needle, the last one as a prefix; the exact filter checks the order.
        # (detail=none keeps no positions: half the indexing cost, and order is checked anyway.)
        query = " AND ".join([f'"{word}"' for word in words[:-1]] + [f'"{words[-1]}"*'])
        found = RawSQL("SELECT rowid FROM trials_step_fts WHERE trials_step_fts MATCH %s", [query])
    else:
        if any(len(word) > MAX_WORD for word in words):
            return exact  # longer words are kept cut short: only a scan can tell
        query = " & ".join([f"'{word}'" for word in words[:-1]] + [f"'{words[-1]}':*"])
        found = RawSQL(  # one tsquery, so the GIN index answers it whole
            "SELECT step_id FROM trials_stepwords WHERE trial_id = %s AND words @@ %s::tsquery",
            [trial.pk, f"({query}) | {TOO_MANY_WORDS}"],
        )
    return exact.filter(id__in=found)


def matching_everywhere(needle: str):
    """The search texts (`StepText`) of every indexed trial's steps holding `needle` (lower-cased) at a word start.

    Only through the index, so a rare word costs the same however many steps there are: a
    needle with no word in it finds nothing (a scan of every step would), and a trial not
    yet indexed is not searched (`Trial.step_text_indexed`). The index is asked first for
    up to CANDIDATES steps: when that is all, they are listed outright, as PostgreSQL, asked
    for the newest hits of a word it cannot tell is rare (the last word is a prefix), walked
    the step table from its end; a commoner word keeps that walk, which suits it.
    """
    words = [word[:MAX_WORD] for word in WORD.findall(needle)]
    texts = StepText.objects.filter(text__contains=needle)  # the exact needle, in order
    if not words or not has_index():
        return texts.none()
    if connection.vendor == "sqlite":
        query = " AND ".join([f'"{word}"' for word in words[:-1]] + [f'"{words[-1]}"*'])
        sql, params = "SELECT rowid FROM trials_step_fts WHERE trials_step_fts MATCH %s", [query]
    else:  # (a word past MAX_WORD is kept cut: its cut prefix finds it, the exact filter checks the rest)
        query = " & ".join([f"'{word}'" for word in words[:-1]] + [f"'{words[-1]}':*"])
        sql = "SELECT step_id FROM trials_stepwords WHERE words @@ %s::tsquery"
        params = [f"({query}) | {TOO_MANY_WORDS}"]
    probe = f"{sql} LIMIT {CANDIDATES + 1}"
    if connection.vendor == "postgresql":  # planned alone: with the LIMIT a prefix word looked common (a seq scan)
        probe = f"WITH found AS MATERIALIZED ({sql}) SELECT step_id FROM found LIMIT {CANDIDATES + 1}"
    with connection.cursor() as cursor:
        cursor.execute(probe, params)
        candidates = [row[0] for row in cursor.fetchall()]
    if len(candidates) <= CANDIDATES:
        return texts.filter(step_id__in=candidates)
    return texts.filter(step_id__in=RawSQL(sql, params))


def unindex(trial) -> None:
    """Take the trial's steps out of the index, to be indexed again by `index_pending`."""
    if connection.vendor == "sqlite" and Trial.objects.filter(pk=trial.pk, step_text_indexed=True).exists():
        with connection.cursor() as cursor:  # (as `forget_deleted_steps`: the index must be told what it held)
            cursor.execute(
                "INSERT INTO trials_step_fts(trials_step_fts, rowid, text) SELECT 'delete', step_id, text"
                " FROM trials_steptext WHERE trial_id = %s",
                [trial.pk],
            )
    StepText.objects.filter(trial=trial).delete()
    StepWords.objects.filter(trial=trial).delete()
    Trial.objects.filter(pk=trial.pk).update(step_text_indexed=False)
    trial.step_text_indexed = False


@receiver(pre_delete, sender="trials.Trajectory")
def forget_deleted_steps(sender, instance, **kwargs) -> None:
    """Take a trajectory's steps out of SQLite's index before they go (StepWords cascade)."""
    if connection.vendor != "sqlite":
        return
    if Trial.objects.filter(pk=instance.trial_id, step_text_indexed=True).exists():
        with connection.cursor() as cursor:
            # An external-content index must be told what it held, or it breaks.
            cursor.execute(
                "INSERT INTO trials_step_fts(trials_step_fts, rowid, text) SELECT 'delete', t.step_id, t.text"
                " FROM trials_steptext t JOIN trials_step s ON s.id = t.step_id WHERE s.trajectory_id = %s",
                [instance.pk],
            )


@receiver(post_migrate)
def forget_flushed_steps(sender, using: str, **kwargs) -> None:
    """`flush` (the tests' reset) empties trials_step but not the FTS5 table: empty that too."""
    if sender.name != "trials" or connections[using].vendor != "sqlite":
        return
    with connections[using].cursor() as cursor:
        cursor.execute("SELECT 1 FROM sqlite_master WHERE name = 'trials_step_fts'")
        has_fts = cursor.fetchone() is not None
        cursor.execute("SELECT 1 FROM trials_step LIMIT 1")
        if has_fts and cursor.fetchone() is None:
            cursor.execute("INSERT INTO trials_step_fts(trials_step_fts) VALUES ('delete-all')")
