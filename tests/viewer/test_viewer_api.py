"""Viewer API: completeness on the trial, step windows, one step in full, search, permissions, context."""

from __future__ import annotations

import orjson
import pytest
from django.urls import reverse

from tests.builders import XSS, candidate_trial_dir, crafted_trial_dir, import_trial_dir, long_trajectory
from trials import search
from trials.demo import SECRET

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo_trial(tmp_path):
    return import_trial_dir(candidate_trial_dir(tmp_path))


def get(client, name, *args, **params):
    response = client.get(reverse(name, args=args), params)
    assert response.status_code == 200, response.content[:300]
    return response.json()


def test_the_trial_resource_has_the_completeness_object(client_logged_in, demo_trial):
    data = get(client_logged_in, "api-trial-detail", demo_trial.pk)
    checks = {c["check"]: c for c in data["completeness"]["checks"]}
    assert set(checks) == {
        "benchmark",
        "runtimeCorrelation",
        "trajectoryRef",
        "rewardDetailsRef",
        "artifactManifestRef",
    }
    assert data["completeness"]["joinable"] is True


def test_the_steps_endpoint_returns_one_window(client_logged_in, tmp_path):
    trial = long_trajectory(tmp_path, 120)
    data = get(client_logged_in, "api-trial-steps", trial.pk, page=3)
    assert [s["number"] for s in data["steps"]] == list(range(101, 121))
    assert data["pages"] == 3 and data["total"] == 120
    assert data["steps"][0]["url"] == reverse("trial-step", args=[trial.pk, 101])


def test_one_step_in_full_has_the_whole_observation(client_logged_in, tmp_path):
    trial = long_trajectory(tmp_path, 6, observation_bytes=5000)
    step = trial.steps.filter(tool_call_count__gt=0).exclude(observations=None).first()
    data = get(client_logged_in, "api-trial-step", trial.pk, step.index + 1)
    assert data["number"] == step.index + 1
    assert len(data["observations"][0]["content"]) >= 5000
    assert data["tool_calls"][0]["function_name"]
    assert data["tool_calls"][0]["arguments_text"].startswith("{")


def test_a_missing_step_is_a_404(client_logged_in, tmp_path):
    trial = long_trajectory(tmp_path, 6)
    assert client_logged_in.get(reverse("api-trial-step", args=[trial.pk, 7])).status_code == 404


def test_search_pages_through_matches_in_the_database(client_logged_in, tmp_path):
    trial = long_trajectory(tmp_path, 200)
    total = search.scan(trial, "bash").count()
    assert total > 50
    first = get(client_logged_in, "api-trial-search", trial.pk, q="BASH")
    assert len(first["matches"]) == 50 and first["has_more"]
    second = get(client_logged_in, "api-trial-search", trial.pk, q="bash", offset=first["next_offset"])
    assert second["matches"][0]["number"] > first["matches"][-1]["number"]
    assert first["matches"][0]["url"].startswith(reverse("trial-step", args=[trial.pk, first["matches"][0]["number"]]))


@pytest.mark.parametrize("indexed", [False, True], ids=["before indexing", "after indexing"])
def test_search_finds_a_needle_inside_a_word_when_no_word_starts_with_it(client_logged_in, tmp_path, indexed):
    trial = long_trajectory(tmp_path, 60, planted={41: "raise TypeError(boom)"})
    if indexed:
        assert search.index_pending() == 1
    data = get(client_logged_in, "api-trial-search", trial.pk, q="ypeError(boo")
    assert [m["number"] for m in data["matches"]] == [42] and data["word_starts_only"] is False
    assert get(client_logged_in, "api-trial-search", trial.pk, q="ypeError(boox")["matches"] == []


def test_search_says_when_it_found_word_starts_only_and_inside_words_finds_the_rest(client_logged_in, tmp_path):
    trial = long_trajectory(tmp_path, 60, planted={10: "import os", 20: "port 8080"})
    assert search.index_pending() == 1
    holding = trial.steps.filter(search_text__text__contains="port")
    scanned = sorted(i + 1 for i in holding.values_list("index", flat=True))
    by_index = get(client_logged_in, "api-trial-search", trial.pk, q="port")
    assert by_index["word_starts_only"] is True and 11 not in [m["number"] for m in by_index["matches"]]
    inside = get(client_logged_in, "api-trial-search", trial.pk, q="port", inside=1)
    assert [m["number"] for m in inside["matches"]] == scanned and 11 in scanned
    assert inside["word_starts_only"] is False
    html = client_logged_in.get(reverse("trial-detail", args=[trial.pk]), {"q": "port"}).content.decode()
    assert "Where a word starts with it." in html and "inside=1" in html


def test_permissions_endpoint_lists_decisions_with_the_side_effect_flag(client_logged_in, demo_trial):
    data = get(client_logged_in, "api-trial-permissions", demo_trial.pk)
    (decision,) = data["permissions"]
    assert decision["decision"] == "deny"
    assert decision["side_effect_after_denial"] is True
    assert decision["decided_by"] == "policy:default-deny-writes"
    assert decision["tool_name"] == "write_file"


def test_context_endpoint_filters_by_kind(client_logged_in, demo_trial):
    data = get(client_logged_in, "api-trial-context", demo_trial.pk, kind="budget")
    assert data["records"] and all(r["kind"] == "budget" for r in data["records"])
    assert data["records"][0]["max_tokens"] == 8000


def test_no_viewer_endpoint_returns_the_secret_or_raw_markup_unescaped_as_html(client_logged_in, tmp_path):
    trial = import_trial_dir(crafted_trial_dir(tmp_path, tool_result=f"{XSS} key={SECRET}"))
    step = search.scan(trial, "onerror").first()
    for name, args, params in (
        ("api-trial-detail", [trial.pk], {}),
        ("api-trial-steps", [trial.pk], {}),
        ("api-trial-step", [trial.pk, step.index + 1], {}),
        ("api-trial-search", [trial.pk], {"q": "onerror"}),
        ("api-trial-permissions", [trial.pk], {}),
        ("api-trial-context", [trial.pk], {}),
    ):
        response = client_logged_in.get(reverse(name, args=args), params)
        assert response.status_code == 200
        assert response["Content-Type"].startswith("application/json")
        assert SECRET.encode() not in response.content, name


def test_an_agentv_rows_output_messages_are_its_steps_with_their_tool_calls_and_outputs(client_logged_in, tmp_path):
    from tests.builders import import_path
    from trials.models import Trial

    row = {
        "test_id": "fix-bug",
        "target": "model-x",
        "score": 0.5,
        "output": [
            {"role": "user", "content": "Fix the <b>bug</b>"},
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "Reading it"}],
                "toolCalls": [
                    {"tool": "Read", "input": {"file": "a.py"}, "id": "c1", "output": {"text": "x = 1  # needle-77"}}
                ],
                "tokenUsage": {"input": 10, "output": 5},
            },
            "not a message",
        ],
    }
    path = tmp_path / "results.jsonl"
    path.write_text(orjson.dumps(row).decode() + "\n")
    imp = import_path(path)
    assert [p["message"] for p in imp.problems] == ["an output message that is not an object"]
    trial = Trial.objects.get()
    assert (trial.step_count, trial.tool_call_count) == (2, 1)

    step = get(client_logged_in, "api-trial-step", trial.pk, 2)
    assert (step["source"], step["message"]) == ("agent", "Reading it")
    assert step["tool_calls"][0] | {"arguments_text": None} == {
        "tool_call_id": "c1", "function_name": "Read", "arguments": {"file": "a.py"}, "arguments_text": None,
        "skill": None,  # (no agent skill: an OTLP convention, trials/ingest/formats/otlp)
    }  # fmt: skip
    assert step["observations"][0]["content"] == '{"text":"x = 1  # needle-77"}'
    assert get(client_logged_in, "api-trial-step", trial.pk, 1)["message"] == "Fix the <b>bug</b>"
    assert [m["number"] for m in get(client_logged_in, "api-trial-search", trial.pk, q="needle-77")["matches"]] == [2]

    page = client_logged_in.get(reverse("trial-detail", args=[trial.pk])).content.decode()
    assert "Fix the &lt;b&gt;bug&lt;/b&gt;" in page and "<b>bug</b>" not in page
    assert 'id="from-result-row"' in page  # says where the steps come from
    assert "10 in · 5 out" in page  # no "0 cached": the row does not say
    refused = client_logged_in.get(reverse("api-trial-trajectory", args=[trial.pk]))
    assert refused.status_code == 404 and "not an ATIF file" in refused.json()["detail"]
