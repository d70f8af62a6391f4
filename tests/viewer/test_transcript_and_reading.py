"""Issue 23, Musts 4 and 5: one transcript (timed records among the steps, the timeline strip)
and reading (text blocks, one date-time format, agent logs, artifact previews, thousands)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest
from django.conf import settings
from django.urls import reverse

from tests.builders import import_demo, import_trial_dir, long_trajectory, write_trial
from trials.models import PermissionDecision, RuntimeEvent, Step, Trial
from trials.reading.text import argument_blocks
from trials.templatetags.trial_viewer import when

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 11, 3, 15, 32, 12, tzinfo=UTC)
SCRIPT = "#!/bin/sh\nset -e\necho 'a <b> & c'\n"
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


def get(client, url, **params) -> str:
    response = client.get(url, params)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def timed_steps(n: int) -> list[dict]:
    """n steps a minute apart; step 2 writes a script with write_file."""
    steps = []
    for i in range(n):
        step = {"step_id": i + 1, "source": "agent" if i else "user", "message": f"step {i + 1}"}
        step["timestamp"] = (T0 + timedelta(minutes=i)).isoformat()
        if i == 1:
            args = {"path": "/app/run.sh", "content": SCRIPT, "mode": "0755"}
            step["tool_calls"] = [{"tool_call_id": "w1", "function_name": "write_file", "arguments": args}]
            step["observation"] = {"results": [{"source_call_id": "w1", "content": "written"}]}
        steps.append(step)
    return steps


@pytest.fixture
def timed_trial(tmp_path) -> Trial:
    return import_trial_dir(write_trial(tmp_path, steps=timed_steps(4)))


# --- the date-time format -------------------------------------------------------------------


def test_a_date_time_shows_in_one_format_with_its_zone():
    shown = when(datetime(2026, 11, 26, 4, 12, 33, tzinfo=UTC))
    assert shown == '<time datetime="2026-11-26T04:12:33+00:00">2026-11-26 04:12:33 UTC</time>'
    assert when(None) == "–"
    assert when("2026-11-26 as written") == "2026-11-26 as written"


def test_no_template_formats_a_date_its_own_way():
    """One filter (`when`) on every page: no `|date:` but the machine-readable `c`, no `timesince`."""
    offenders = []
    for path in Path(settings.BASE_DIR, "templates").rglob("*.html"):
        text = path.read_text()
        if re.search(r"\|date:\"|\|timesince|\|naturaltime", text):
            offenders.append(path.name)
    assert offenders == []


def test_step_times_and_the_import_list_use_the_one_format(client_logged_in, timed_trial):
    html = get(client_logged_in, timed_trial.get_absolute_url())
    assert '<time datetime="2026-11-03T15:32:12+00:00">2026-11-03 15:32:12 UTC</time>' in html
    imports = get(client_logged_in, reverse("imports"))
    assert re.search(r"<time datetime=\"[^\"]+\">\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC</time>", imports)


# --- text blocks ------------------------------------------------------------------------------


def test_multi_line_string_arguments_become_text_blocks_and_the_rest_stays_json():
    rest, blocks = argument_blocks({"path": "/app/run.sh", "content": SCRIPT, "note": "one line\n"})
    assert rest == {"path": "/app/run.sh", "note": "one line\n"}  # a trailing newline is one line
    assert blocks == [("content", SCRIPT)]
    assert argument_blocks(["a\nb"]) == (["a\nb"], [])  # not an object: printed as it is


def test_a_text_block_is_masked_like_any_text():
    key = "sk-proj-" + "Ab1" * 12
    _, blocks = argument_blocks({"content": f"export OPENAI_API_KEY={key}\necho hi"})
    assert key not in blocks[0][1] and "[redacted]" in blocks[0][1]


def test_write_file_content_shows_with_its_line_breaks_escaped(client_logged_in, timed_trial):
    html = get(client_logged_in, timed_trial.get_absolute_url())
    block = re.search(
        r'<pre class="text long" data-field="argument" data-index="0" data-key="content">(.*?)</pre>', html, re.S
    )
    assert block is not None
    assert block.group(1) == "#!/bin/sh\nset -e\necho &#x27;a &lt;b&gt; &amp; c&#x27;\n"
    assert "&quot;path&quot;: &quot;/app/run.sh&quot;" in html  # the other arguments, pretty JSON
    assert "set -e\\n" not in html  # no JSON escapes for the script


# --- the transcript ---------------------------------------------------------------------------


def test_runtime_events_and_unlinked_permissions_sit_between_the_steps_by_time(client_logged_in, timed_trial):
    RuntimeEvent.objects.create(trial=timed_trial, type="tool.started", timestamp=T0 + timedelta(seconds=90))
    RuntimeEvent.objects.create(trial=timed_trial, type="run.finished", timestamp=T0 + timedelta(hours=1))
    PermissionDecision.objects.create(
        trial=timed_trial, action_id="a1", decision="deny", tool_name="bash", requested_at=T0 + timedelta(seconds=150)
    )
    html = get(client_logged_in, timed_trial.get_absolute_url())
    order = re.findall(r'id="step-(\d)"|data-kind="(runtime|permission)"', html)
    stream = [n or kind for n, kind in order]
    assert stream == ["1", "2", "runtime", "3", "permission", "4", "runtime"]
    assert "tool.started" in html and "run.finished" in html


def test_the_type_filters_name_every_kind_of_record(client_logged_in, timed_trial):
    html = get(client_logged_in, timed_trial.get_absolute_url())
    offered = re.findall(r'<input type="checkbox" data-hide="(\w+)"', html)
    assert offered == ["messages", "reasoning", "tools", "permissions", "context", "runtime", "system", "copied"]
    hidden = get(client_logged_in, timed_trial.get_absolute_url(), hide="runtime,permissions")
    assert 'class="steps hide-runtime hide-permissions"' in hidden


def test_a_window_shows_only_the_records_of_its_time(client_logged_in, tmp_path):
    trial = long_trajectory(tmp_path, 120)
    at = dict(Step.objects.filter(trial=trial).values_list("index", "timestamp"))  # the generator's steps are timed
    assert all(at.values())
    RuntimeEvent.objects.create(trial=trial, type="in.window.one", timestamp=at[10])
    RuntimeEvent.objects.create(trial=trial, type="in.window.two", timestamp=at[60])
    first = get(client_logged_in, trial.get_absolute_url())
    second = get(client_logged_in, trial.get_absolute_url(), page=2)
    assert "in.window.one" in first and "in.window.two" not in first
    assert "in.window.two" in second and "in.window.one" not in second


def test_the_timeline_has_a_lane_per_trajectory_and_the_phases_and_links_to_steps(client_logged_in, tmp_path):
    trial = long_trajectory(tmp_path, 300)
    html = get(client_logged_in, trial.get_absolute_url())
    strip = re.search(r'<section class="timeline" id="timeline".*?</section>', html, re.S).group(0)
    shown = re.findall(r'<a class="seg( here)?" href="([^"]+)" data-number="(\d+)"', strip)
    assert all(bool(here) == (int(n) <= 50) for here, _, n in shown)  # the window on screen is marked
    segments = [(href, n) for _, href, n in shown]
    assert 2 < len(segments) <= 61  # sampled, whatever the length
    assert segments[0] == (reverse("trial-step", args=[trial.pk, 1]), "1")
    assert segments[-1][1] == "300"
    assert all(href == reverse("trial-step", args=[trial.pk, int(n)]) for href, n in segments)


def test_the_timeline_draws_harbors_phases(client_logged_in, tmp_path):
    folder = write_trial(tmp_path, steps=timed_steps(3))
    result = orjson.loads((folder / "result.json").read_bytes())
    result["agent_execution"] = {"started_at": "2026-11-03T15:32:00Z", "finished_at": "2026-11-03T15:35:00Z"}
    result["verifier"] = {"started_at": "2026-11-03T15:35:00Z", "finished_at": "2026-11-03T15:36:00Z"}
    (folder / "result.json").write_bytes(orjson.dumps(result))
    trial = import_trial_dir(folder)
    html = get(client_logged_in, trial.get_absolute_url())
    assert 'class="lane lane-phases"' in html
    assert 'class="seg phase-agent_execution"' in html and 'class="seg phase-verifier"' in html


# --- agent logs, artifacts, thousands ---------------------------------------------------------


def test_agent_logs_have_their_own_tab_in_command_order(client_logged_in, tmp_path):
    folder = write_trial(tmp_path)
    (folder / "agent" / "setup.txt").write_text("installing the agent\n")
    for n in (0, 2, 10):
        (folder / "agent" / f"command-{n}").mkdir()
        (folder / "agent" / f"command-{n}" / "stdout.txt").write_text(f"output of command {n}\n")
    (folder / "trial.log").write_text("the trial's own log\n")
    trial = import_trial_dir(folder)
    html = get(client_logged_in, trial.get_absolute_url(), tab="agent-logs")
    names = re.findall(r"<h3>(agent/[^<]+)</h3>", html)
    assert names == [
        "agent/setup.txt",
        "agent/command-0/stdout.txt",
        "agent/command-2/stdout.txt",
        "agent/command-10/stdout.txt",
    ]
    assert "output of command 10" in html and "the trial&#x27;s own log" not in html
    logs = get(client_logged_in, trial.get_absolute_url(), tab="logs")
    assert "the trial&#x27;s own log" in logs and "agent/setup.txt" not in logs


def test_artifacts_are_previewed_in_the_page_and_images_served_inline(client_logged_in, tmp_path):
    folder = write_trial(tmp_path)
    (folder / "artifacts" / "notes.txt").write_text("line one\n<script>x</script>\n")
    (folder / "artifacts" / "report.json").write_bytes(orjson.dumps({"passed": 3, "failed": 0}))
    (folder / "artifacts" / "shot.png").write_bytes(PNG)
    (folder / "artifacts" / "big.log").write_text("x" * (300 * 1024))
    names = ["notes.txt", "report.json", "shot.png", "big.log"]
    manifest = [{"source": f"/app/{n}", "destination": n, "type": "file", "status": "ok"} for n in names]
    (folder / "artifacts" / "manifest.json").write_bytes(orjson.dumps(manifest))
    trial = import_trial_dir(folder)
    html = get(client_logged_in, trial.get_absolute_url(), tab="artifacts")
    assert "line one\n&lt;script&gt;x&lt;/script&gt;" in html
    assert "{\n  &quot;passed&quot;: 3,\n  &quot;failed&quot;: 0\n}" in html
    assert "no preview: too large to preview" in html
    image = trial.artifacts.get(destination="shot.png")
    src = reverse("trial-artifact-preview", args=[trial.pk, image.pk])
    assert f'src="{src}"' in html
    response = client_logged_in.get(src)
    assert response.status_code == 200 and response["Content-Type"] == "image/png"
    assert b"".join(response.streaming_content) == PNG
    text = trial.artifacts.get(destination="notes.txt")
    assert client_logged_in.get(reverse("trial-artifact-preview", args=[trial.pk, text.pk])).status_code == 404


def test_the_artifact_preview_needs_a_login(client, timed_trial):
    response = client.get(reverse("trial-artifact-preview", args=[timed_trial.pk, 1]))
    assert response.status_code in (302, 401, 403)


def test_counts_on_the_job_page_have_thousands_separators(client_logged_in, tmp_path):
    trial = import_demo(tmp_path, tasks=1, attempts=1)[0]
    trial.job.trials.update(input_tokens=1234567, output_tokens=1000)
    html = get(client_logged_in, trial.job.get_absolute_url())
    assert "1,235,567" in html
