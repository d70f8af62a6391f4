"""A redacted context value is in the stored pack and nowhere else: not in a page, an API
response, an export, a search result or a log line."""

from __future__ import annotations

import json
import logging

import orjson
import pytest
from django.core.management import call_command
from django.urls import URLPattern, URLResolver, get_resolver

from tests.builders import demo_jobs
from trials.demo import SECRET
from trials.models import ContextRecord, Import, Trial

pytestmark = pytest.mark.django_db


def every_get_url(trial: Trial, imp: Import) -> list[str]:
    """Every URL pattern of the site, with this trial and import filled in."""
    values = {"pk": trial.pk, "number": 1, "artifact_pk": 0}
    urls = []

    def walk(patterns, prefix: str) -> None:
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                if not route.startswith("admin"):
                    walk(pattern.url_patterns, route)
            elif isinstance(pattern, URLPattern):
                urls.append(route)

    walk(get_resolver().url_patterns, "")
    filled = []
    for route in urls:
        url = "/" + route.lstrip("^").rstrip("$")
        if "<uuid:pk>" in url:
            url = url.replace("<uuid:pk>", str(imp.pk))
        for name, value in values.items():
            url = url.replace(f"<int:{name}>", str(value))
        if "<" not in url:
            filled.append(url)
    return filled


def test_the_secret_is_only_in_the_raw_pack(client, tmp_path, caplog, capsys, django_user_model):
    admin = django_user_model.objects.create_superuser("admin", password="pw-admin-1")
    client.force_login(admin)
    caplog.set_level(logging.DEBUG)
    call_command("import_packs", str(demo_jobs(tmp_path)), "--no-progress")
    assert SECRET in (next(tmp_path.rglob("context-events.jsonl"))).read_text()  # it was in the pack
    assert ContextRecord.objects.filter(redaction_state="masked").exists()

    trial = Trial.objects.filter(context_records__redaction_state="masked").first()
    imp = Import.objects.first()
    responses = {}
    for url in every_get_url(trial, imp):
        responses[url] = client.get(url)
    tabs = ["trajectory", "context", "permissions", "verifier", "artifacts", "logs", "agent-logs"]
    tabs += ["exception", "config", "events"]
    for tab in tabs:
        responses[f"tab {tab}"] = client.get(f"/trials/{trial.pk}/", {"tab": tab})
    responses["search page"] = client.get(f"/trials/{trial.pk}/", {"q": "sk-demo"})  # a prefix: no echo of it all
    responses["search api"] = client.get(f"/api/trials/{trial.pk}/search/", {"q": "sk-demo"})
    responses["qc export"] = client.get("/api/qc/export/")
    responses["context api"] = client.get(f"/api/trials/{trial.pk}/context/")
    for number in range(1, trial.step_count + 1):
        responses[f"step {number}"] = client.get(f"/api/trials/{trial.pk}/steps/{number}/")

    assert sum(1 for r in responses.values() if r.status_code == 200) > 40  # the walk really read pages
    for name, response in responses.items():
        body = b"".join(response.streaming_content) if response.streaming else response.content
        assert SECRET.encode() not in body, name
    for record in caplog.records:
        assert SECRET not in record.getMessage()
    captured = capsys.readouterr()
    assert SECRET not in captured.out and SECRET not in captured.err


def test_redacted_items_in_runtime_events_are_not_shown_whatever_their_value_looks_like(tmp_path, client_logged_in):
    """A value shaped like no known secret: only the redaction marks keep it out (not the last-line mask)."""
    from tests.builders import import_path, write_trial

    trial_dir = write_trial(tmp_path)
    masked = {"item_id": "item-1", "content": "LEAKCANARY-1111", "redaction_state": "masked"}
    named_later = {"item_id": "item-2", "content": "LEAKCANARY-2222", "redaction_state": "none"}
    events = [
        {"type": "context.item.added", "eventId": "e1", "sessionId": "s1", "payload": {"item": masked, "n": 2**70}},
        {"type": "context.item.added", "eventId": "e2", "sessionId": "s1", "payload": {"item": named_later}},
        {"type": "context.redaction.applied", "eventId": "e3", "sessionId": "s1",
         "payload": {"redaction_id": "r1", "item_id": "item-2", "redacted_fields": ["content"], "reason": "pii"}},
    ]  # fmt: skip
    lines = b"\n".join(json.dumps(event).encode() for event in events)  # (an integer past 64 bits: not orjson)
    (trial_dir / "agent" / "runtime-events.jsonl").write_bytes(lines)
    (tmp_path / "one-event.json").write_text(json.dumps({**events[0], "eventId": "e9"}))  # a file of its own
    import_path(trial_dir)
    import_path(tmp_path / "one-event.json")
    trial = Trial.objects.get()
    assert trial.events.count() == 3

    bodies = {tab: client_logged_in.get(f"/trials/{trial.pk}/", {"tab": tab}).content for tab in ("events", "context")}
    for name in ("context", "permissions"):
        response = client_logged_in.get(f"/api/trials/{trial.pk}/{name}/")
        assert response.status_code == 200
        bodies[f"{name} api"] = response.content
    for name, body in bodies.items():
        assert b"LEAKCANARY" not in body, name
    assert b"[redacted]" in bodies["events"]
    from trials.models import RuntimeEvent

    for event in RuntimeEvent.objects.all():  # nor in the index the pages and the API read from
        assert "LEAKCANARY" not in json.dumps([event.payload, event.raw, event.refs])


def test_a_redaction_covers_its_item_in_every_file_of_the_trial_and_every_form_of_its_paths(tmp_path, client_logged_in):
    from tests.builders import import_path, write_trial

    trial_dir = write_trial(tmp_path)
    common = {"schema_version": "0.1.1", "time": "2026-11-03T14:07:27Z", "context_id": "ctx_1", "session_id": "s1"}

    def context_event(event_id: str, event_type: str, data: dict) -> dict:
        return {**common, "event_id": event_id, "event_type": event_type, "data": data}

    masked = {
        "item_id": "item-1",
        "context_kind": "credential",
        "content": "CANARY-A",
        "redaction_state": "masked",
        "content_parts": [{"type": "text", "text": "CANARY-B"}],
        "redacted_fields": ["/source_refs/0/uri"],
        "source_refs": [{"uri": "file:///CANARY-C"}],
    }  # fmt: skip (a source with no source_id)
    plain_here = {"item_id": "item-2", "context_kind": "memory", "content": "CANARY-D", "redaction_state": "none",
                  "source_refs": [{"source_id": "s", "uri": "file:///CANARY-E"}]}  # fmt: skip
    context_lines = [
        context_event("ce1", "context.item.added", {"item": masked}),
        context_event("ce2", "context.item.added", {"item": plain_here}),
        context_event("ce3", "context.injection.applied", {"injection": {
            "injection_id": "inj-1", "source_item_refs": [{"ref": "item-1", "excerpt": "CANARY-F"}]}}),
    ]  # fmt: skip
    runtime_lines = [  # another file of the same trial: a copy of item-1, and the redaction of item-2
        {"type": "context.item.added", "eventId": "e1", "sessionId": "s1",
         "payload": {"item": {"item_id": "item-1", "context_kind": "credential", "content": "CANARY-G",
                              "source_refs": [{"uri": "file:///CANARY-I"}]}}},
        {"type": "tool.started", "eventId": "e2", "sessionId": "s1",
         "payload": {"arguments": {"item_ref": "item-1", "value": "CANARY-H"}}},
        {"type": "context.redaction.applied", "eventId": "e3", "sessionId": "s1",
         "payload": {"redaction": {"redaction_id": "r1", "item_id": "item-2",
                                   "redacted_fields": ["content", "source_refs[0].uri"]}}},
    ]  # fmt: skip
    for name, lines in (("context-events.jsonl", context_lines), ("runtime-events.jsonl", runtime_lines)):
        (trial_dir / "agent" / name).write_text("\n".join(json.dumps(line) for line in lines))
    import_path(trial_dir)
    trial = Trial.objects.get()

    bodies = {}
    for tab in ("events", "context"):
        response = client_logged_in.get(f"/trials/{trial.pk}/", {"tab": tab})
        assert response.status_code == 200, tab
        bodies[tab] = response.content
    for name in ("context", "permissions"):
        bodies[f"{name} api"] = client_logged_in.get(f"/api/trials/{trial.pk}/{name}/").content
    for name, body in bodies.items():
        assert b"CANARY" not in body, (name, body[body.find(b"CANARY") - 200 : body.find(b"CANARY") + 50])
    from trials.models import RuntimeEvent

    stored = [[e.payload, e.raw, e.refs] for e in RuntimeEvent.objects.all()]
    stored += [[r.data] for r in ContextRecord.objects.all()]
    assert "CANARY" not in json.dumps(stored)
    item_2 = ContextRecord.objects.get(kind="item", record_id="item-2")
    assert item_2.status == "redacted" and item_2.redaction_state == "redacted"  # not its own "none"


@pytest.mark.django_db(transaction=True)
def test_the_migration_scrubs_redacted_items_in_events_imported_before_the_fix():
    from tests.builders import migrate_to
    from trials.models import RuntimeEvent

    old_event = migrate_to(("trials", "0017_trial_files_sha256")).get_model("trials", "RuntimeEvent")
    item = {"item_id": "item-1", "content": "LEAKCANARY-3333", "redaction_state": "masked"}
    raw = {"type": "context.item.added", "eventId": "e1", "payload": {"item": item}}
    old_event.objects.create(type="context.item.added", event_id="e1", payload=raw["payload"], raw=raw)
    old_event.objects.create(type="turn.submitted", event_id="e2", payload={"text": "kept as it is"}, raw={})
    migrate_to()
    scrubbed, untouched = RuntimeEvent.objects.order_by("event_id")
    assert "LEAKCANARY" not in orjson.dumps([scrubbed.payload, scrubbed.raw]).decode()
    assert scrubbed.payload["item"]["item_id"] == "item-1" and untouched.payload == {"text": "kept as it is"}


@pytest.mark.django_db(transaction=True)
def test_the_migration_scrubs_again_what_older_rules_left_in_events_and_context_records():
    from tests.builders import migrate_to
    from trials.models import RuntimeEvent

    old = migrate_to(("trials", "0019_step_refs_name_their_trajectory"))
    item = {"item_id": "item-1", "context_kind": "file", "redaction_state": "masked",
            "redacted_fields": ["source_refs[0].uri"], "source_refs": [{"uri": "file:///LEAKCANARY-4444"}]}  # fmt: skip
    raw = {"type": "context.item.added", "eventId": "e1", "payload": {"item": item}}
    old.get_model("trials", "RuntimeEvent").objects.create(
        type="context.item.added", event_id="e1", payload=raw["payload"], raw=raw
    )
    old.get_model("trials", "ContextRecord").objects.create(kind="item", record_id="item-1", data=item)
    migrate_to()
    event, record = RuntimeEvent.objects.get(), ContextRecord.objects.get()
    assert "LEAKCANARY" not in json.dumps([event.payload, event.raw, record.data])
    assert record.data["source_refs"] == [{"uri": "[redacted]"}] and record.data["item_id"] == "item-1"


def test_the_trial_apis_mask_secrets_in_what_they_return_as_the_pages_do(tmp_path, client_logged_in, triager):
    from tests.builders import import_path, write_trial

    trial_dir = write_trial(tmp_path)
    result = json.loads((trial_dir / "result.json").read_text())
    key = "sk-qaLEAKTEST1234567890abcdef"
    result["exception_info"] = {"exception_type": "RuntimeError", "exception_message": f"bad key {key}",
                                "exception_traceback": f"Traceback: {key}"}  # fmt: skip
    (trial_dir / "result.json").write_text(json.dumps(result))
    import_path(trial_dir)
    trial = Trial.objects.get()
    assert key in trial.exception_message  # the index keeps it (the pages and the API mask it)
    for url in (f"/api/trials/{trial.pk}/", f"/trials/{trial.pk}/?tab=exception"):
        body = client_logged_in.get(url).content
        assert key.encode() not in body and b"[redacted]" in body, url
    client_logged_in.force_login(triager)
    body = client_logged_in.get(f"/trials/{trial.pk}/feedback/").content  # the form shows the exception too
    assert key.encode() not in body and b"bad key [redacted]" in body


@pytest.mark.parametrize("read", ["whole", "streamed"])
def test_a_redacted_item_the_agent_carried_in_its_own_trajectory_is_withheld_there_too(
    tmp_path, client_logged_in, monkeypatch, read
):
    """The agent's tool call and its step's extra carry the redacted item itself: the trajectory tab, the
    step APIs, search and the ATIF download show "[redacted]" in its place; the stored file keeps it."""
    from jsonschema import Draft202012Validator

    from trials.ingest.formats import atif as atif_reader

    if read == "streamed":
        monkeypatch.setattr(atif_reader, "STREAM_THRESHOLD", 100)  # as a file too big to hold in memory

    from tests.builders import REFERENCE, atif, good_steps, import_path, write_trial
    from trials import search
    from trials.models import StepText, ToolCall, Trajectory

    item = {"item_id": "item-1", "content": "LEAKCANARY-TRAJ", "redaction_state": "none"}
    steps = good_steps()
    steps[1]["tool_calls"].append({"tool_call_id": "c2", "function_name": "use_context", "arguments": dict(item)})
    steps[1]["observation"]["results"].append({"source_call_id": "c2", "content": "ok"})
    steps[1]["extra"] = {"context_items": [dict(item)]}
    trial_dir = write_trial(tmp_path, steps=steps)
    redaction = {"type": "context.redaction.applied", "eventId": "e1", "sessionId": "s1",
                 "payload": {"redaction_id": "r1", "item_id": "item-1", "reason": "pii"}}  # fmt: skip
    (trial_dir / "agent" / "runtime-events.jsonl").write_bytes(orjson.dumps(redaction) + b"\n")
    import_path(trial_dir)
    search.index_pending()
    trial = Trial.objects.get()
    assert b"LEAKCANARY-TRAJ" in (trial_dir / "agent" / "trajectory.json").read_bytes()  # the pack keeps it

    bodies = {
        "trajectory tab": client_logged_in.get(f"/trials/{trial.pk}/").content,
        "step page": client_logged_in.get(f"/trials/{trial.pk}/steps/2/").content,
        "steps api": client_logged_in.get(f"/api/trials/{trial.pk}/steps/").content,
        "step api": client_logged_in.get(f"/api/trials/{trial.pk}/steps/2/").content,
    }
    assert client_logged_in.get(f"/api/trials/{trial.pk}/search/", {"q": "LEAKCANARY"}).json()["matches"] == []
    download = client_logged_in.get(f"/api/trials/{trial.pk}/trajectory/")
    assert download["X-Benchviewer-Withheld"]
    bodies["atif download"] = b"".join(download.streaming_content)
    for name, body in bodies.items():
        assert b"LEAKCANARY" not in body, name
    assert b"[redacted]" in bodies["step api"]
    for row in ToolCall.objects.all():
        assert "LEAKCANARY" not in json.dumps(row.arguments)
    assert StepText.objects.count() == 2 and not StepText.objects.filter(text__icontains="leakcanary").exists()
    # The download is the file with the item's value withheld, and still valid ATIF
    expected = atif(steps)
    expected["steps"][1]["tool_calls"][1]["arguments"]["content"] = "[redacted]"
    expected["steps"][1]["extra"]["context_items"][0]["content"] = "[redacted]"
    downloaded = orjson.loads(bodies["atif download"])
    assert downloaded == expected
    schema = orjson.loads((REFERENCE.parent / "spec" / "harbor-0.25" / "atif-trajectory.schema.json").read_bytes())
    assert not list(Draft202012Validator(schema).iter_errors(downloaded))
    assert Trajectory.objects.get().withheld


def test_a_trajectory_a_redaction_does_not_touch_is_served_as_its_file(tmp_path, client_logged_in):
    from tests.builders import import_path, write_trial
    from trials.models import Trajectory

    trial_dir = write_trial(tmp_path)
    redaction = {"type": "context.redaction.applied", "eventId": "e1", "sessionId": "s1",
                 "payload": {"redaction_id": "r1", "item_id": "item-9", "reason": "pii"}}  # fmt: skip
    (trial_dir / "agent" / "runtime-events.jsonl").write_bytes(orjson.dumps(redaction) + b"\n")
    import_path(trial_dir)
    trial = Trial.objects.get()
    assert not Trajectory.objects.get().withheld
    download = client_logged_in.get(f"/api/trials/{trial.pk}/trajectory/")
    assert "X-Benchviewer-Withheld" not in download
    assert b"".join(download.streaming_content) == (trial_dir / "agent" / "trajectory.json").read_bytes()


def test_a_redaction_imported_later_scrubs_what_its_trial_holds_already(tmp_path, client_logged_in):
    """The trial (its events and its trajectory carry the item) first; then a file of events that
    redacts the item, joined to it by its session id."""
    from tests.builders import good_steps, import_path, write_trial
    from trials import search
    from trials.models import RuntimeEvent, StepText, ToolCall, Trajectory

    item = {"item_id": "item-1", "content": "LEAKCANARY-LATER"}
    steps = good_steps()
    steps[1]["tool_calls"][0]["arguments"] = dict(item)
    trial_dir = write_trial(tmp_path / "trial", steps=steps)
    (trial_dir / "trial.log").write_text(f"loading {json.dumps(item)}\n")
    added = {"type": "context.item.added", "eventId": "e1", "sessionId": "sess-bad-input", "payload": {"item": item}}
    (trial_dir / "agent" / "runtime-events.jsonl").write_bytes(orjson.dumps(added) + b"\n")
    import_path(trial_dir)
    search.index_pending()
    trial = Trial.objects.get()
    assert client_logged_in.get(f"/api/trials/{trial.pk}/search/", {"q": "leakcanary"}).json()["matches"]

    redaction = {"type": "context.redaction.applied", "eventId": "e2", "sessionId": "sess-bad-input",
                 "payload": {"redaction_id": "r1", "item_id": "item-1", "reason": "pii"}}  # fmt: skip
    (tmp_path / "later.jsonl").write_bytes(orjson.dumps(redaction) + b"\n")
    imp = import_path(tmp_path / "later.jsonl")
    assert imp.outcomes[0]["outcome"] == "imported" and RuntimeEvent.objects.filter(trial=trial).count() == 2
    search.index_pending()
    bodies = {
        "trajectory tab": client_logged_in.get(f"/trials/{trial.pk}/").content,
        "events tab": client_logged_in.get(f"/trials/{trial.pk}/", {"tab": "events"}).content,
        "logs tab": client_logged_in.get(f"/trials/{trial.pk}/", {"tab": "logs"}).content,
        "context api": client_logged_in.get(f"/api/trials/{trial.pk}/context/").content,
        "step api": client_logged_in.get(f"/api/trials/{trial.pk}/steps/2/").content,
        "atif download": b"".join(client_logged_in.get(f"/api/trials/{trial.pk}/trajectory/").streaming_content),
    }
    for name, body in bodies.items():
        assert b"LEAKCANARY" not in body, name
    assert client_logged_in.get(f"/api/trials/{trial.pk}/search/", {"q": "leakcanary"}).json()["matches"] == []
    assert StepText.objects.filter(trial=trial).count() == 2  # indexed again, from the scrubbed steps
    assert not [row for row in ToolCall.objects.all() if "LEAKCANARY" in json.dumps(row.arguments)]
    assert not [e for e in RuntimeEvent.objects.all() if "LEAKCANARY" in json.dumps([e.raw, e.payload])]
    assert Trajectory.objects.get().withheld
    assert orjson.loads(bodies["atif download"])["steps"][1]["tool_calls"][0]["arguments"] == {
        "item_id": "item-1", "content": "[redacted]"
    }  # fmt: skip


@pytest.mark.parametrize(
    "source",
    ["an escaped id", "an item marked in place", "an event's item with no context_kind", "a context file",
     "the evidence pack", "an item marked in place, beside a context file only", "a file in artifacts",
     "the evidence pack beside the trial, imported later"],
)  # fmt: skip
def test_a_trajectorys_item_is_withheld_whichever_file_redacts_it_and_however_its_id_is_written(
    tmp_path, client_logged_in, source
):
    from tests.builders import REFERENCE, atif, good_steps, import_path, write_trial
    from trials.models import Trajectory

    item = {"item_id": "ctx/item-1", "content": "LEAKCANARY-SRC"}
    if source.startswith("an item marked in place"):
        item["redaction_state"] = "masked"
    steps = good_steps()
    steps[1]["tool_calls"][0]["arguments"] = item
    trial_dir = write_trial(tmp_path, steps=steps)
    written = orjson.dumps(atif(steps))
    if source == "an escaped id":  # as PHP writes a slash: the same id in JSON
        written = written.replace(b'"ctx/item-1"', b'"ctx\\/item-1"')
    (trial_dir / "agent" / "trajectory.json").write_bytes(written)
    redaction = {"redaction_id": "r1", "target_ref": "ctx/item-1", "redaction_method": "mask",
                 "redacted_fields": ["content"]}  # fmt: skip
    event = {"type": "context.redaction.applied", "eventId": "e1", "sessionId": "s1",
             "payload": {"redaction_id": "r1", "item_id": "ctx/item-1", "reason": "pii"}}  # fmt: skip
    if source == "an item marked in place":
        event = {"type": "tool.call.completed", "eventId": "e1", "sessionId": "s1"}  # (the trial has events)
    if source == "an event's item with no context_kind":
        masked = {"item_id": "ctx/item-1", "content": "x", "redaction_state": "masked"}
        event = {"type": "context.item.added", "eventId": "e1", "sessionId": "s1", "payload": {"item": masked}}
    if source not in ("an escaped id", "an item marked in place", "an event's item with no context_kind"):
        event = {"type": "tool.call.completed", "eventId": "e1", "sessionId": "s1"}
    if source != "an item marked in place, beside a context file only":
        (trial_dir / "agent" / "runtime-events.jsonl").write_bytes(orjson.dumps(event) + b"\n")
    else:  # no event at all
        context = {"context_id": "c1", "scope": "session", "lifecycle": "active",
                   "items": [{"item_id": "other", "context_kind": "memory", "content": "x"}]}  # fmt: skip
        (trial_dir / "agent" / "context.json").write_bytes(orjson.dumps(context))
    if source == "a context file":
        (trial_dir / "agent" / "context-redactions.json").write_bytes(orjson.dumps([redaction]))
    if source == "a file in artifacts":
        (trial_dir / "artifacts" / "context-redactions.json").write_bytes(orjson.dumps([redaction]))
    pack = orjson.loads((REFERENCE / "lime-agentruntime" / "benchmark-trial-pack.json").read_bytes())
    pack = {**pack, "benchmark": {**pack["benchmark"], "trialId": trial_dir.name}, "redactions": [redaction]}
    if source == "the evidence pack":
        (trial_dir / "benchmark-trial-pack.json").write_bytes(orjson.dumps(pack))
    import_path(trial_dir)
    if source == "the evidence pack beside the trial, imported later":
        (tmp_path / "evidence.json").write_bytes(orjson.dumps(pack))
        import_path(tmp_path / "evidence.json")
    trial = Trial.objects.get()
    step = client_logged_in.get(f"/api/trials/{trial.pk}/steps/2/").content
    download = client_logged_in.get(f"/api/trials/{trial.pk}/trajectory/")
    assert b"LEAKCANARY" not in step and b"[redacted]" in step
    assert b"LEAKCANARY" not in b"".join(download.streaming_content) and download["X-Benchviewer-Withheld"]
    assert Trajectory.objects.get().withheld


def test_a_redacted_item_in_json_text_and_in_the_trials_documents_is_withheld(tmp_path, client_logged_in):
    """The item written as JSON text (a tool's arguments as a string, JSON lines, a result printed as JSON
    among words, a log line), inside result.json and reward-details.json (the Config and Verifier tabs),
    and under a key not listed as raw."""
    from tests.builders import good_steps, import_path, write_trial
    from trials.models import Trajectory

    item = {"item_id": "item-1", "content": "LEAKCANARY-A", "summary": "LEAKCANARY-B"}
    steps = good_steps()
    steps[1]["tool_calls"][0]["arguments"] = json.dumps(item)
    steps[1]["tool_calls"].append({"tool_call_id": "c2", "function_name": "cat", "arguments": {
        "stdin": json.dumps({"item_id": "item-2", "content": "fine"}) + "\n" + json.dumps(item)}})  # fmt: skip
    steps[1]["observation"]["results"][0]["content"] = "context loaded: " + json.dumps({"found": [item]}) + " ok"
    trial_dir = write_trial(tmp_path, steps=steps)
    for log in ("trial.log", "agent/stdout.txt", "verifier/test-stdout.txt"):
        (trial_dir / log).write_text(f"12:00 loading context {json.dumps(item)}\n")
    result = orjson.loads((trial_dir / "result.json").read_bytes())
    (trial_dir / "result.json").write_bytes(orjson.dumps({**result, "agent_result": {"context": [item]}}))
    details = {"criteria": [{"name": "works", "score": 1.0, "evidence": item}], "context": item}
    (trial_dir / "verifier" / "reward-details.json").write_bytes(orjson.dumps(details))
    redaction = {"type": "context.redaction.applied", "eventId": "e1", "sessionId": "s1",
                 "payload": {"redaction_id": "r1", "item_id": "item-1", "reason": "pii"}}  # fmt: skip
    (trial_dir / "agent" / "runtime-events.jsonl").write_bytes(orjson.dumps(redaction) + b"\n")
    import_path(trial_dir)
    trial = Trial.objects.get()
    bodies = {tab: client_logged_in.get(f"/trials/{trial.pk}/", {"tab": tab}).content for tab in
              ("trajectory", "config", "verifier", "logs")}  # fmt: skip
    assert b"loading context" in bodies["logs"] and b"fine" in bodies["trajectory"]  # (what is shown, kept)
    bodies["step api"] = client_logged_in.get(f"/api/trials/{trial.pk}/steps/2/").content
    bodies["trial api"] = client_logged_in.get(f"/api/trials/{trial.pk}/").content
    bodies["download"] = b"".join(client_logged_in.get(f"/api/trials/{trial.pk}/trajectory/").streaming_content)
    for name, body in bodies.items():
        assert b"LEAKCANARY" not in body, name
    assert Trajectory.objects.get().withheld
    arguments = orjson.loads(bodies["download"])["steps"][1]["tool_calls"][0]["arguments"]
    assert orjson.loads(arguments) == {"item_id": "item-1", "content": "[redacted]", "summary": "[redacted]"}


def test_events_imported_before_their_trial_join_it_and_their_redaction_applies(tmp_path, client_logged_in):
    from tests.builders import good_steps, import_path, write_trial
    from trials.models import RuntimeEvent, Trajectory

    redaction = {"type": "context.redaction.applied", "eventId": "e1", "sessionId": "sess-bad-input",
                 "payload": {"redaction_id": "r1", "item_id": "item-1", "reason": "pii"}}  # fmt: skip
    (tmp_path / "first.jsonl").write_bytes(orjson.dumps(redaction) + b"\n")
    import_path(tmp_path / "first.jsonl")
    assert RuntimeEvent.objects.get().trial is None  # no trial to join yet
    steps = good_steps()
    steps[1]["tool_calls"][0]["arguments"] = {"item_id": "item-1", "content": "LEAKCANARY-EARLY"}
    import_path(write_trial(tmp_path / "trial", steps=steps))  # its trajectory's session_id: sess-bad-input
    trial = Trial.objects.get()
    assert RuntimeEvent.objects.get().trial == trial
    step = client_logged_in.get(f"/api/trials/{trial.pk}/steps/2/").content
    download = b"".join(client_logged_in.get(f"/api/trials/{trial.pk}/trajectory/").streaming_content)
    assert b"LEAKCANARY" not in step and b"LEAKCANARY" not in download
    assert Trajectory.objects.get().withheld


def test_an_artifact_preview_is_scrubbed_by_the_trials_redactions(tmp_path, client_logged_in):
    """Artifacts are stored as imported; their preview on the page withholds what a redaction names."""
    from tests.builders import import_path, write_trial

    trial_dir = write_trial(tmp_path)
    events = [
        {"type": "context.item.added", "eventId": "e1", "sessionId": "s1",
         "payload": {"item": {"item_id": "item-2", "content": "LEAKCANARY-7777", "redaction_state": "none"}}},
        {"type": "context.redaction.applied", "eventId": "e2", "sessionId": "s1",
         "payload": {"redaction_id": "r1", "item_id": "item-2", "redacted_fields": ["content"], "reason": "pii"}},
    ]  # fmt: skip
    (trial_dir / "agent" / "runtime-events.jsonl").write_bytes(b"\n".join(json.dumps(e).encode() for e in events))
    copy = {"item_id": "item-2", "content": "LEAKCANARY-7777"}
    self_marked = {"item_id": "item-9", "content": "LEAKCANARY-9999", "redaction_state": "masked"}
    (trial_dir / "artifacts" / "context.json").write_text(json.dumps({"items": [copy, self_marked]}))
    (trial_dir / "artifacts" / "context.jsonl").write_text(json.dumps(copy) + "\nplain line\n")
    manifest = [{"source": f"/app/{n}", "destination": n, "type": "file", "status": "ok"}
                for n in ("context.json", "context.jsonl")]  # fmt: skip
    (trial_dir / "artifacts" / "manifest.json").write_text(json.dumps(manifest))
    import_path(trial_dir)
    trial = Trial.objects.get()
    body = client_logged_in.get(f"/trials/{trial.pk}/", {"tab": "artifacts"}).content.decode()
    assert "LEAKCANARY" not in body
    assert body.count("[redacted]") >= 3 and "plain line" in body  # previewed, not dropped


def test_a_redacted_item_in_an_artifact_that_is_not_utf8_is_scrubbed_in_its_export(tmp_path, client_logged_in):
    """One stray byte does not make a text file binary to the scrubber: the item goes, the byte stays."""
    from tests.builders import import_path, write_trial
    from tests.imports.export_helpers import exported

    trial_dir = write_trial(tmp_path)
    item = json.dumps({"item_id": "item-1", "content": "LEAKCANARY-LOG"})
    (trial_dir / "artifacts" / "agent.log").write_bytes(b"latin-1 caf\xe9 " + item.encode() + b"\n")
    entry = {"source": "/app/agent.log", "destination": "agent.log", "type": "file", "status": "ok"}
    (trial_dir / "artifacts" / "manifest.json").write_bytes(orjson.dumps([entry]))
    redaction = {"type": "context.redaction.applied", "eventId": "e1", "sessionId": "s1",
                 "payload": {"redaction_id": "r1", "item_id": "item-1", "reason": "pii"}}  # fmt: skip
    (trial_dir / "agent" / "runtime-events.jsonl").write_bytes(orjson.dumps(redaction) + b"\n")
    import_path(trial_dir)
    trial = Trial.objects.get()
    artifact = trial.artifacts.get(destination="agent.log")
    preview = client_logged_in.get(f"/trials/{trial.pk}/artifacts/{artifact.pk}/preview/").content
    assert b"LEAKCANARY" not in preview  # (not UTF-8: no preview is drawn)
    archive = exported(client_logged_in, trial)
    [log] = [archive.read(name) for name in archive.namelist() if name.endswith("artifacts/agent.log")]
    assert b"LEAKCANARY" not in log and log.startswith(b"latin-1 caf\xe9 ")
