"""The trial page: header, completeness, tabs, step windows, permalinks, inline facts, search."""

from __future__ import annotations

import re
import shutil

import orjson
import pytest
from django.urls import reverse

from tests.builders import (
    REFERENCE,
    XSS,
    atif,
    candidate_trial_dir,
    crafted_trial_dir,
    demo_jobs,
    import_path,
    import_trial_dir,
    long_trajectory,
)
from trials.demo import SECRET
from trials.models import Trial

pytestmark = pytest.mark.django_db

TABS = ("trajectory", "context", "permissions", "verifier", "artifacts", "logs", "agent-logs")
TABS += ("exception", "config", "events")


@pytest.fixture
def demo_trial(tmp_path):
    return import_trial_dir(candidate_trial_dir(tmp_path))


def page(client, trial, **params):
    response = client.get(reverse("trial-detail", args=[trial.pk]), params)
    assert response.status_code == 200
    return response.content.decode()


def step_numbers(html: str) -> list[int]:
    return [int(n) for n in re.findall(r'<article class="step[^"]*" id="step-(\d+)"', html)]


def test_the_trial_page_needs_a_login(client, demo_trial):
    response = client.get(reverse("trial-detail", args=[demo_trial.pk]))
    assert response.status_code == 302
    assert "/accounts/login/" in response["Location"]


def test_the_header_answers_which_dataset_task_configuration_and_refs(client_logged_in, demo_trial):
    html = page(client_logged_in, demo_trial)
    for text in (
        "benchviewer-demo/terminal-tasks",
        "2026.11",
        demo_trial.task.name,
        "candidate-feedback-v3",
        "candidate",
        "terminus-2",
        "gpt-5.4",
        "harborJobRef",
        "harborTrialRef",
        "taskTomlRef",
        demo_trial.runtime_correlation["sessionId"],
        demo_trial.runtime_correlation["runId"],
    ):
        assert text in html, text
    for key in demo_trial.rewards:
        assert f"<code>{key}</code>" in html


def test_the_phase_bar_shows_every_harbor_phase(client_logged_in, demo_trial):
    html = page(client_logged_in, demo_trial)
    assert {"environment_setup", "agent_setup", "agent_execution"} <= set(demo_trial.phases)
    for phase in demo_trial.phases:
        assert f'class="phase phase-{phase}"' in html
        assert f"{phase.replace('_', ' ')} · " in html


def test_the_completeness_panel_shows_each_check_and_its_consequence(client_logged_in, tmp_path):
    trial_dir = candidate_trial_dir(tmp_path)
    (trial_dir / "verifier" / "reward-details.json").unlink()
    shutil.rmtree(trial_dir / "artifacts")
    (trial_dir / "benchmark-trial-pack.json").unlink()
    trial = import_trial_dir(trial_dir)
    html = page(client_logged_in, trial)
    panel = html[html.index('id="completeness"') :]
    panel = panel[: panel.index("</section>")]
    for check in ("benchmark", "runtimeCorrelation", "trajectoryRef", "rewardDetailsRef", "artifactManifestRef"):
        assert f'data-check="{check}"' in panel
    assert "benchmark eval blocks" in panel
    assert "viewable, but cannot be promoted" in panel
    assert "not joinable" in panel


def test_every_tab_renders(client_logged_in, demo_trial):
    for tab in TABS:
        html = page(client_logged_in, demo_trial, tab=tab)
        assert f'id="tab-{tab}"' in html
        assert 'class="tab active" data-tab="' + tab + '"' in html


def test_an_unknown_tab_falls_back_to_the_trajectory(client_logged_in, demo_trial):
    assert 'id="tab-trajectory"' in page(client_logged_in, demo_trial, tab="nope")


def test_each_step_shows_source_time_model_tokens_and_tool_calls_with_their_results(client_logged_in, demo_trial):
    html = page(client_logged_in, demo_trial)
    assert step_numbers(html) == list(range(1, demo_trial.step_count + 1))
    assert 'data-source="system"' in html and 'data-source="user"' in html and 'data-source="agent"' in html
    assert "gpt-5.4" in html
    assert re.search(r"[\d,]+ in · [\d,]+ cached · [\d,]+ out", html)
    assert 'class="call part"' in html and 'class="call-result"' in html
    assert "&quot;command&quot;:" in html  # pretty JSON arguments, escaped
    assert re.search(r"\+\d", html)  # time since the previous step


def test_a_permission_denial_followed_by_a_side_effect_is_flagged_on_its_tool_call(client_logged_in, demo_trial):
    permission = demo_trial.permissions.get()
    assert permission.side_effect_after_denial
    html = page(client_logged_in, demo_trial)
    call = html[html.index(f'data-call-id="{permission.tool_call_id}"') :]
    call = call[: call.index("</article>")]
    assert 'class="permission decision-deny alarm-box"' in call
    assert permission.decided_by in call
    assert permission.tool_name in call
    assert "A side effect happened after this denial" in call
    assert "side effect after denial" in html[: html.index('id="trial-facts"')]  # in the title too


def test_the_permissions_tab_lists_every_decision(client_logged_in, demo_trial):
    html = page(client_logged_in, demo_trial, tab="permissions")
    assert 'id="permissions-table"' in html
    assert "side effect happened" in html
    assert "policy:default-deny-writes" in html


def test_context_records_appear_inline_on_their_step(client_logged_in, demo_trial):
    html = page(client_logged_in, demo_trial)
    step = html[html.index('id="step-2"') :]
    step = step[: step.index("</article>")]
    assert "Context for this step" in step
    for kind in ("item", "selection", "budget", "assembly"):
        assert f'class="ctx-ref ctx-{kind}"' in step
    assert "?tab=context#ctx-" in step


def test_the_context_tab_groups_selection_budget_assembly_missing_and_redaction(client_logged_in, demo_trial):
    html = page(client_logged_in, demo_trial, tab="context")
    for section in ("ctx-item", "ctx-selection", "ctx-budget", "ctx-assembly", "ctx-compaction", "ctx-redaction"):
        assert f'id="{section}"' in html, section
    assert "Omitted (" in html and "policy block" in html
    assert "Credential detected by the secret scanner." in html


def test_a_deep_link_opens_the_window_that_holds_the_step(client_logged_in, tmp_path):
    trial = long_trajectory(tmp_path, 130)
    response = client_logged_in.get(reverse("trial-step", args=[trial.pk, 120]))
    html = response.content.decode()
    assert step_numbers(html) == list(range(101, 131))
    assert 'data-focus="120"' in html
    assert 'class="step src-agent focused" id="step-120"' in html or 'focused" id="step-120"' in html


def test_a_deep_link_past_the_end_is_a_404(client_logged_in, tmp_path):
    trial = long_trajectory(tmp_path, 10)
    assert client_logged_in.get(reverse("trial-step", args=[trial.pk, 11])).status_code == 404


def test_the_go_to_step_box_redirects_to_the_permalink(client_logged_in, tmp_path):
    trial = long_trajectory(tmp_path, 80)
    response = client_logged_in.get(reverse("trial-detail", args=[trial.pk]), {"step": 70})
    assert response.status_code == 302
    assert response["Location"] == reverse("trial-step", args=[trial.pk, 70])


def test_steps_are_paged_fifty_at_a_time(client_logged_in, tmp_path):
    trial = long_trajectory(tmp_path, 120)
    assert step_numbers(page(client_logged_in, trial)) == list(range(1, 51))
    assert step_numbers(page(client_logged_in, trial, page=2)) == list(range(51, 101))
    html = page(client_logged_in, trial, page=99)  # past the end: the last page
    assert step_numbers(html) == list(range(101, 121))
    assert "steps 101–120 of 120" in html


def test_the_pager_names_whole_windows_above_and_below_the_steps(client_logged_in, tmp_path):
    trial = long_trajectory(tmp_path, 120)
    html = page(client_logged_in, trial, page=2)
    assert html.count('<nav class="pagination steps-pagination">') == 2  # above and below the steps
    assert html.count("← steps 1–50</a>") == 2 and html.count("steps 101–120 →</a>") == 2
    assert "steps 51–100 of 120 (page 2 / 3)" in html
    first = page(client_logged_in, trial)
    assert "steps 51–100 →</a>" in first and "steps 51– →" not in first


def test_the_download_atif_button_serves_the_trajectory_file(client_logged_in, tmp_path):
    trial = long_trajectory(tmp_path, 3)
    html = page(client_logged_in, trial)
    href = re.search(r'id="download-atif" href="([^"]+)"', html)[1].replace("&amp;", "&")
    served = b"".join(client_logged_in.get(href).streaming_content)
    assert served == trial.trajectories.get().blob.read()


def test_every_step_has_a_copy_link_button_with_its_permalink(client_logged_in, demo_trial):
    html = page(client_logged_in, demo_trial)
    assert f'data-url="{reverse("trial-step", args=[demo_trial.pk, 3])}"' in html


def test_the_page_costs_the_same_number_of_queries_whatever_the_trajectory_length(
    client_logged_in, tmp_path, django_assert_max_num_queries
):
    short = long_trajectory(tmp_path, 60, name="short")
    long = long_trajectory(tmp_path, 600, name="long")
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as short_queries:
        page(client_logged_in, short)
    with django_assert_max_num_queries(len(short_queries)):
        page(client_logged_in, long)
    with django_assert_max_num_queries(len(short_queries)):
        client_logged_in.get(reverse("trial-step", args=[long.pk, 550]))


def test_search_finds_steps_outside_the_loaded_window(client_logged_in, tmp_path):
    trial = long_trajectory(tmp_path, 120, planted={110: "needle-in-the-haystack"})
    html = page(client_logged_in, trial, q="Needle-In")
    assert step_numbers(html) == list(range(1, 51))
    assert f'href="{reverse("trial-step", args=[trial.pk, 111])}?q=Needle-In#step-111"' in html
    assert 'data-query="Needle-In"' in html


def test_a_search_with_no_match_says_so(client_logged_in, demo_trial):
    assert "No match for" in page(client_logged_in, demo_trial, q="zzz-not-there")


def test_hidden_parts_from_the_url_are_hidden_on_load(client_logged_in, demo_trial):
    html = page(client_logged_in, demo_trial, hide="reasoning,system,bogus")
    assert 'class="steps hide-reasoning hide-system"' in html
    assert 'data-hide="reasoning">' in html  # its box unticked


def test_long_observations_are_collapsed_with_their_size_and_a_show_all_button(client_logged_in, tmp_path):
    trial = long_trajectory(tmp_path, 6, observation_bytes=5000)
    html = page(client_logged_in, trial)
    assert 'class="text observation collapsed"' in html
    assert re.search(r'class="expand secondary" data-field="observation" data-index="0">show all \(4\.\d\sKB\)', html)


def test_the_verifier_tab_shows_rewards_criteria_tests_and_output(client_logged_in, demo_trial):
    html = page(client_logged_in, demo_trial, tab="verifier")
    assert 'id="reward-keys"' in html
    for criterion in demo_trial.criteria.all():
        assert criterion.name in html
    assert 'id="ctrf"' in html
    for test in demo_trial.ctrf_tests:
        assert test["name"] in html
    assert "verifier/test-stdout.txt" in html
    assert f'href="{reverse("trial-step", args=[demo_trial.pk, 11])}">step:11</a>' in html  # evidence refs link


def test_the_artifacts_tab_lists_the_manifest_and_downloads_the_stored_bytes(client_logged_in, demo_trial):
    html = page(client_logged_in, demo_trial, tab="artifacts")
    artifact = demo_trial.artifacts.exclude(blob=None).first()
    assert artifact.destination in html
    assert artifact.blob.sha256[:16] in html
    response = client_logged_in.get(reverse("trial-artifact", args=[demo_trial.pk, artifact.pk]))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/octet-stream"
    assert response["Content-Disposition"].startswith("attachment")
    assert b"".join(response.streaming_content) == artifact.blob.read()


def test_an_artifact_of_another_trial_is_not_served(client_logged_in, demo_trial):
    artifact = demo_trial.artifacts.first()
    assert client_logged_in.get(reverse("trial-artifact", args=[demo_trial.pk + 1, artifact.pk])).status_code == 404


def test_the_logs_exception_and_config_tabs_show_their_texts(client_logged_in, tmp_path):
    import_path(demo_jobs(tmp_path) / "candidate-job")
    errored = Trial.objects.exclude(exception_type="").get()
    html = page(client_logged_in, errored, tab="exception")
    assert errored.exception_type in html
    assert "Traceback" in html
    demo_trial = Trial.objects.filter(exception_type="").get()
    assert "No exception." in page(client_logged_in, demo_trial, tab="exception")
    assert "trial.log" in page(client_logged_in, demo_trial, tab="logs")
    assert "config.json" in page(client_logged_in, demo_trial, tab="config")
    assert "benchmark.trial.started" in page(client_logged_in, demo_trial, tab="events")


def test_subagent_trajectories_are_reachable_from_their_step_and_back(client_logged_in, tmp_path):
    source = REFERENCE / "harbor" / "atif" / "terminus-2"
    trial_dir = candidate_trial_dir(tmp_path)
    agent = trial_dir / "agent"
    shutil.copy(source / "hello-world-context-summarization.trajectory.json", agent / "trajectory.json")
    for part in ("summary", "questions", "answers"):
        name = f"hello-world-context-summarization.trajectory.summarization-1-{part}.json"
        shutil.copy(source / name, agent / f"trajectory.summarization-1-{part}.json")
    trial = import_trial_dir(trial_dir)
    html = page(client_logged_in, trial)
    summary = trial.trajectories.get(path__endswith="summarization-1-summary.json")
    assert f'?t={summary.pk}">Context summarization 1: Step 1 - Summary generation</a>' in html
    assert "context compaction boundary" in html
    sub = page(client_logged_in, trial, t=summary.pk)
    assert "referenced from" in sub
    assert f'href="{reverse("trial-step", args=[trial.pk, 5])}"' in sub
    assert "copied context" in sub  # the subagent's copied steps are marked
    detail = client_logged_in.get(reverse("api-trial-step", args=[trial.pk, 5])).json()  # "show all"
    refs = detail["observations"][0]["subagent_trajectory_ref"]
    assert [ref["trajectory_path"] for ref in refs] == [
        f"trajectory.summarization-1-{part}.json" for part in ("summary", "questions", "answers")
    ]


def test_agent_text_is_escaped_everywhere_on_the_page(client_logged_in, tmp_path):
    trial_dir = crafted_trial_dir(tmp_path, message=XSS, tool_result=XSS, artifact_name='<img src=x onerror="x=1">.txt')
    trial = import_trial_dir(trial_dir)
    for tab in TABS:
        html = page(client_logged_in, trial, tab=tab)
        assert "<img src=x" not in html and "<script>window" not in html, tab
    assert "&lt;img src=x onerror=&quot;window.__xss=1&quot;&gt;" in page(client_logged_in, trial)
    assert "&lt;img src=x onerror=&quot;x=1&quot;&gt;.txt" in page(client_logged_in, trial, tab="artifacts")


def test_no_page_has_inline_scripts_or_event_handlers(client_logged_in, demo_trial):
    for tab in TABS:
        html = page(client_logged_in, demo_trial, tab=tab)
        assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html), tab
        assert not re.search(r"<[^>]+\son[a-z]+\s*=", html), tab
        assert " style=" not in html, tab


def test_the_secret_never_reaches_a_page(client_logged_in, tmp_path):
    trial_dir = candidate_trial_dir(tmp_path)
    assert SECRET.encode() in (trial_dir / "agent" / "context-events.jsonl").read_bytes()  # it is in the pack
    trial = import_trial_dir(trial_dir)
    for tab in TABS:
        assert SECRET not in page(client_logged_in, trial, tab=tab)
    assert "Environment variables of the runner" in page(client_logged_in, trial, tab="context")


def test_a_secret_that_slipped_into_a_tool_result_is_masked_on_the_page(client_logged_in, tmp_path):
    trial = import_trial_dir(crafted_trial_dir(tmp_path, tool_result=f"export OPENAI_API_KEY={SECRET}"))
    html = page(client_logged_in, trial)
    assert SECRET not in html
    assert "export OPENAI_API_KEY=[redacted]" in html


def test_a_harbor_trial_without_trajectory_says_so_without_lime_words(client_logged_in):
    import_path(REFERENCE / "harbor" / "job-thinharness" / "job")
    trial = Trial.objects.get(name="configure-git-webserver__YfkUhxf")
    html = page(client_logged_in, trial)
    assert "This trial has no trajectory in its source." in html
    assert "smoke only" not in html and "not joinable" not in html  # Lime words, and plain Harbor has no Lime pack
    assert "test_outputs.py" in page(client_logged_in, trial, tab="verifier") or 'id="ctrf"' in page(
        client_logged_in, trial, tab="verifier"
    )


@pytest.mark.parametrize(
    "path",
    sorted((REFERENCE / "harbor" / "atif").rglob("*.json")),
    ids=lambda p: p.name,
)
def test_every_reference_trajectory_renders_every_step(client_logged_in, path):
    import_path(path)
    trial = Trial.objects.latest("pk")
    html = page(client_logged_in, trial)
    assert step_numbers(html) == list(range(1, min(trial.step_count, 50) + 1))


def test_token_bars_share_one_scale_over_the_whole_trajectory(client_logged_in, tmp_path):
    """The biggest step is in the second window; the first window's bars are drawn against it."""
    steps = [
        {"step_id": i + 1, "source": "agent", "message": f"step {i + 1}", "metrics": {"prompt_tokens": 100}}
        for i in range(60)
    ]
    steps[55]["metrics"] = {"prompt_tokens": 900, "completion_tokens": 100}
    path = tmp_path / "tokens.json"
    path.write_bytes(orjson.dumps({**atif(steps), "session_id": "token-scale"}))
    import_path(path)
    trial = Trial.objects.get()
    assert trial.trajectories.get().max_step_tokens == 1000
    first_window = page(client_logged_in, trial)
    assert 1 in step_numbers(first_window) and 56 not in step_numbers(first_window)
    assert re.findall(r'class="tok prompt" data-width="([\d.]+)"', first_window)[0] == "10.0"


def test_a_short_observation_with_non_ascii_text_is_shown_whole_with_no_show_all_button(client_logged_in, tmp_path):
    from tests.builders import atif, good_steps, import_path

    steps = good_steps()
    steps[1]["observation"]["results"][0]["content"] = "done — résumé ✓ " * 10  # 160 characters, more bytes
    (tmp_path / "trajectory.json").write_bytes(orjson.dumps(atif(steps)))
    import_path(tmp_path / "trajectory.json")
    html = page(client_logged_in, Trial.objects.get())
    assert "done — résumé ✓" in html
    assert "show all" not in html and "observation collapsed" not in html


def test_search_matches_in_a_trial_of_several_files_say_which_file(client_logged_in, tmp_path):
    from tests.builders import import_path, loose_run

    import_path(loose_run(tmp_path / "run"))
    html = page(client_logged_in, Trial.objects.get(), q="running")
    listed = re.sub(r"<[^>]+>", "", html[html.index('<ol class="matches">') : html.index("</ol>")])
    assert re.findall(r"step (\d+) (\w+) · (\w+)", listed) == [("2", "agent", "main"), ("2", "agent", "continuation")]
