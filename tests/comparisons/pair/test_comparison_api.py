"""The comparison API, its cache and Celery path, charts, the saved event, and the page."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import orjson
import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from comparisons import services, tasks
from comparisons.computing import cache
from comparisons.computing.events import comparison_event
from comparisons.models import Comparison, SavedComparison
from comparisons.statistics.sides import Side
from tests.builders import ERRORED, REFERENCE, build_side, import_path, on_broker, write_trial
from tests.factories import TrialFactory
from trials.models import Trial

pytestmark = pytest.mark.django_db

SEED_JQ = """
  .comparison.meanRewardDelta >= 0
  and .comparison.p0QcGateRegressionCount == 0
  and .comparison.evidenceCompletenessRate >= .comparison.baselineEvidenceCompletenessRate
"""
REQUIRED_FIELDS = (
    "meanRewardDelta",
    "meanRewardDeltaCi95",
    "passRateDelta",
    "p0QcGateRegressionCount",
    "evidenceCompletenessRate",
    "baselineEvidenceCompletenessRate",
    "valid",
    "invalidReasons",
    "headlineEligible",
    "headlineReasons",
    "decision",
    "remainingRisk",
)


@pytest.fixture
def sides():
    base = build_side("base", {f"t{i}": [0.0 if i < 4 else 1.0, 1.0] for i in range(12)}, role="baseline")
    cand = build_side("cand", {f"t{i}": [1.0, 1.0] for i in range(12)}, role="candidate")
    return base, cand


def _url(base, cand):
    return f"/api/comparisons/?baseline={base.pk}&candidate={cand.pk}"


def test_api_returns_the_seed_fields_and_the_seed_guard_holds(client_logged_in, sides):
    response = client_logged_in.get(_url(*sides))
    assert response.status_code == 200
    c = response.json()["comparison"]
    assert set(REQUIRED_FIELDS) <= set(c)
    # The seed's jq check, in Python.
    assert (
        c["meanRewardDelta"] >= 0
        and c["p0QcGateRegressionCount"] == 0
        and c["evidenceCompletenessRate"] >= c["baselineEvidenceCompletenessRate"]
    )
    assert c["meanRewardDelta"] == pytest.approx(4 * 0.5 / 12)
    assert c["decision"] == "promote"


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed")
def test_the_seeds_own_jq_expression_runs_unchanged_on_the_api_output(client_logged_in, sides, tmp_path):
    body = client_logged_in.get(_url(*sides)).content
    path = tmp_path / "feedback-v2-comparison.json"
    path.write_bytes(body)
    assert subprocess.run(["jq", "-e", SEED_JQ, str(path)], capture_output=True).returncode == 0

    # A candidate with a P0 regression fails the same check (jq -e exits 1 on false).
    base, cand = sides
    cand.trials.update(documents={"evidence_pack": {"decisionInputs": {"p0QcGateRegressionCount": 1}}})
    TrialFactory(configuration=cand, job=cand.trials.first().job, task=cand.trials.first().task, reward=1.0)
    path.write_bytes(client_logged_in.get(_url(base, cand)).content)
    assert subprocess.run(["jq", "-e", SEED_JQ, str(path)], capture_output=True).returncode == 1


def test_the_api_accepts_jobs_as_sides(client_logged_in, sides):
    base, cand = sides
    response = client_logged_in.get(
        f"/api/comparisons/?baseline_job={base.trials.first().job_id}&candidate_job={cand.trials.first().job_id}"
    )
    assert response.status_code == 200
    assert response.json()["baseline"]["kind"] == "job"
    query = f"baseline_job={base.trials.first().job_id}&candidate_job={cand.trials.first().job_id}"
    event = client_logged_in.post(f"/api/comparisons/save/?{query}").json()["event"]
    assert event["benchmark"]["configurationId"] == event["benchmark"]["candidateConfigurationId"] == cand.key
    assert event["benchmark"]["baselineConfigurationId"] == base.key  # the jobs' one configuration each


def test_a_right_to_left_override_in_a_job_name_is_isolated_in_its_label(client_logged_in, sides):
    base, cand = sides
    job = base.trials.first().job
    job.name = "evil\u202eemanboj"  # shows as "evil" + "jobname" reversed, and would turn " #9" around too
    job.save()
    query = f"baseline_job={job.pk}&candidate_job={cand.trials.first().job_id}"
    label = client_logged_in.get(f"/api/comparisons/?{query}").json()["baseline"]["label"]
    assert label == f"job \u2068{job.name}\u2069 #{job.pk}"  # the override ends with the name
    page = client_logged_in.get(f"/comparisons/?{query}").content.decode()
    assert f"<h2><bdi>{label}</bdi> → " in page
    assert f"\u2068{job.name}\u2069 #{job.pk} (" in page  # the pickers' options too (an <option> takes no <bdi>)
    job.name = "x\u2069\u202eevil"  # its own PDI would close the isolate early, and free the override
    job.save()
    swapped = f"baseline_job={cand.trials.first().job_id}&candidate_job={job.pk}"  # (a comparison not cached yet)
    label = client_logged_in.get(f"/api/comparisons/?{swapped}").json()["candidate"]["label"]
    assert label == f"job \u2068x\u202eevil\u2069 #{job.pk}"
    from trials.reading.text import isolated

    assert isolated("rlm\u200f") == "\u2068rlm\u200f\u2069"  # a right-to-left mark moves " #9" too


def test_bad_or_missing_sides_are_a_400(client_logged_in, sides):
    assert client_logged_in.get("/api/comparisons/?baseline=1").status_code == 400
    assert client_logged_in.get("/api/comparisons/?baseline=999&candidate=998").status_code == 400


def test_api_and_page_need_a_login(client, sides):
    assert client.get(_url(*sides)).status_code in (401, 403)
    assert client.get(
        f"/api/comparisons/charts/heatmap/?baseline={sides[0].pk}&candidate={sides[1].pk}"
    ).status_code in (
        401,
        403,
    )
    response = client.get(f"/comparisons/?baseline={sides[0].pk}&candidate={sides[1].pk}")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_the_api_accepts_basic_auth_for_scripts(client, user, sides):
    import base64

    token = base64.b64encode(b"reviewer:pw-reviewer-1").decode()
    response = client.get(_url(*sides), HTTP_AUTHORIZATION=f"Basic {token}")
    assert response.status_code == 200


# --------------------------------------------------------------------------- cache and Celery


def test_the_cached_comparison_is_reused_until_a_side_changes(sides, monkeypatch):
    base, cand = sides
    calls = []
    real = cache.compute
    monkeypatch.setattr(cache, "compute", lambda *a, **k: calls.append(1) or real(*a, **k))
    b, c = Side("configuration", base.pk), Side("configuration", cand.pk)

    first = services.get_or_compute(b, c)
    again = services.get_or_compute(b, c)
    assert len(calls) == 1 and first.pk == again.pk and again.status == Comparison.Status.DONE

    task = cand.trials.first().task
    TrialFactory(configuration=cand, job=cand.trials.first().job, task=task, reward=0.0)
    changed = services.get_or_compute(b, c)
    assert len(calls) == 2
    assert changed.result["candidate"]["metrics"]["trials"] == 25
    assert changed.fingerprint != first.fingerprint


def test_rescoring_a_trial_or_a_new_baseline_trial_invalidates_the_cache(sides):
    base, cand = sides
    b, c = Side("configuration", base.pk), Side("configuration", cand.pk)
    first = services.get_or_compute(b, c).fingerprint
    base.trials.filter(reward=0.0).update(reward=1.0, status="passed")
    assert cache.fingerprint(b, c) != first


def test_the_api_runs_the_celery_task(client_logged_in, sides, monkeypatch):
    ran = []
    real = tasks.compute_comparison_task.run
    monkeypatch.setattr(tasks.compute_comparison_task, "run", lambda pk: ran.append(pk) or real(pk))
    response = client_logged_in.get(_url(*sides))
    assert response.status_code == 200 and ran == [response.json()["id"]]


@pytest.fixture
def not_eager():
    """Tasks sent, not run here (Celery's own setting, taken off again afterwards)."""
    with on_broker(task_always_eager=False):
        yield


def test_with_a_real_broker_the_api_answers_202_then_the_result(client_logged_in, sides, monkeypatch, not_eager):
    queued = []
    monkeypatch.setattr(tasks.compute_comparison_task, "delay", lambda pk: queued.append(pk))

    pending = client_logged_in.get(_url(*sides))
    assert pending.status_code == 202
    body = pending.json()
    assert body["status"] == "queued" and queued == [body["id"]]
    assert client_logged_in.get(body["statusUrl"]).json()["status"] == "queued"
    assert client_logged_in.get(_url(*sides)).status_code == 202 and len(queued) == 1  # not queued twice

    tasks.compute_comparison_task.apply(args=[body["id"]])  # what the worker does
    assert client_logged_in.get(body["statusUrl"]).json()["status"] == "done"
    done = client_logged_in.get(_url(*sides))
    assert done.status_code == 200 and done.json()["comparison"]["decision"] == "promote"


# --------------------------------------------------------------------------- charts


@pytest.mark.parametrize("chart", ["reward_delta", "heatmap", "distribution", "cost_reward", "pass_rate"])
def test_chart_endpoints_return_plotly_figures_whose_points_link_to_trials(client_logged_in, sides, chart):
    base, cand = sides
    cand.trials.update(cost_usd=0.25)
    response = client_logged_in.get(f"/api/comparisons/charts/{chart}/?baseline={base.pk}&candidate={cand.pk}")
    assert response.status_code == 200
    figure = response.json()
    assert set(figure) == {"data", "layout"} and figure["data"]
    urls = []
    for trace in figure["data"]:
        assert trace["type"] in {"bar", "heatmap", "box", "scatter"}
        custom = trace.get("customdata") or []
        urls += [u for row in custom for u in (row if isinstance(row, list) else [row])]
    assert urls and all(re.match(r"^/trials/", u) for u in urls)


@pytest.mark.parametrize("chart", ["reward_delta", "heatmap", "distribution", "pass_rate"])
def test_a_chart_of_sides_that_scored_nothing_says_no_data_not_empty_axes(client_logged_in, chart):
    base = build_side("base", {"a": [ERRORED], "b": [ERRORED]})  # (errored: no reward, neither passed nor failed)
    cand = build_side("cand", {"a": [ERRORED], "b": [ERRORED, ERRORED]})
    figure = client_logged_in.get(f"/api/comparisons/charts/{chart}/?baseline={base.pk}&candidate={cand.pk}").json()
    assert figure["data"] == [] and figure["layout"]["yaxis"] == {"visible": False}
    assert figure["layout"]["annotations"][0]["text"].startswith("no data: no ")


def test_an_unknown_chart_is_a_404(client_logged_in, sides):
    assert (
        client_logged_in.get(f"/api/comparisons/charts/pie/?baseline={sides[0].pk}&candidate={sides[1].pk}").status_code
        == 404
    )


# --------------------------------------------------------------------------- the comparison event


def _lime_validator() -> Draft202012Validator:
    schema = json.loads((REFERENCE / "lime-agentruntime" / "agentruntime-lime-profile-event.schema.json").read_text())
    # The portable base schema it $refs is not in shared/reference: stand in an open schema.
    base = Resource.from_contents({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"})
    registry = Registry().with_resource(
        "https://limecloud.github.io/agentruntime/schemas/agentruntime-event.schema.json", base
    )
    return Draft202012Validator(schema, registry=registry, format_checker=Draft202012Validator.FORMAT_CHECKER)


def test_saving_records_a_schema_valid_comparison_event_that_can_be_downloaded(client_logged_in, sides):
    base, cand = sides
    response = client_logged_in.post(f"/api/comparisons/save/?baseline={base.pk}&candidate={cand.pk}")
    assert response.status_code == 201
    saved = SavedComparison.objects.get()
    event = saved.event
    assert event["type"] == "benchmark.comparison.completed"
    assert event["schemaVersion"] == "lime-profile-0.4.0" and event["runtimeId"] == "benchviewer"
    errors = sorted(_lime_validator().iter_errors(event), key=str)
    assert not errors, errors
    assert event["comparison"]["decision"] == "promote"
    assert event["comparison"]["meanRewardDelta"] == pytest.approx(4 * 0.5 / 12)

    download = client_logged_in.get(response.json()["downloadUrl"])
    assert download.status_code == 200
    assert download["Content-Disposition"] == f'attachment; filename="{saved.event_id}.json"'
    assert json.loads(download.content) == event


def test_saving_takes_the_sides_as_json_numbers_and_refuses_other_json_with_a_400(client_logged_in, sides):
    base, cand = sides
    url = "/api/comparisons/save/"
    response = client_logged_in.post(url, {"baseline": base.pk, "candidate": cand.pk}, content_type="application/json")
    assert response.status_code == 201, response.content
    for body in ([], [base.pk, cand.pk], {"baseline": [base.pk], "candidate": True}, "x"):
        response = client_logged_in.post(url, body, content_type="application/json")
        assert response.status_code == 400, body
        assert "detail" in response.json()


def test_the_validator_rejects_an_event_without_a_comparison(sides):
    comparison = services.get_or_compute(Side("configuration", sides[0].pk), Side("configuration", sides[1].pk))
    event = comparison_event(comparison)
    del event["comparison"]
    assert list(_lime_validator().iter_errors(event))


def test_saving_from_the_page_stores_the_event_and_lists_its_download(client_logged_in, sides):
    base, cand = sides
    response = client_logged_in.post("/comparisons/save/", {"baseline": base.pk, "candidate": cand.pk}, follow=True)
    assert response.status_code == 200
    saved = SavedComparison.objects.get()
    assert f"/api/comparisons/saved/{saved.pk}/event.json" in response.content.decode()
    from tests.builders import make_user

    client_logged_in.force_login(make_user("vera", "viewer"))  # may not save: sees the saved events only
    page = client_logged_in.get("/comparisons/", {"baseline": base.pk, "candidate": cand.pk}).content.decode()
    assert "<h2>Saved events</h2>" in page and f"/api/comparisons/saved/{saved.pk}/event.json" in page
    assert "Save as benchmark.comparison.completed event" not in page
    SavedComparison.objects.all().delete()
    page = client_logged_in.get("/comparisons/", {"baseline": base.pk, "candidate": cand.pk}).content.decode()
    assert 'id="save"' not in page  # no empty card


# --------------------------------------------------------------------------- the page


def test_the_page_shows_decision_validity_matrix_and_chart_endpoints(client_logged_in, sides):
    base, cand = sides
    response = client_logged_in.get(f"/comparisons/?baseline={base.pk}&candidate={cand.pk}")
    html = response.content.decode()
    assert response.status_code == 200
    assert 'id="decision"' in html and ">promote<" in html
    assert "Valid comparison" in html
    assert f'href="/trials/?configuration={cand.pk}&amp;task=t0"' in html
    assert html.count("data-chart-url=") == 5
    assert "/static/plotly/plotly-benchviewer.min.js" in html and "/static/js/comparison.js" in html
    assert "/static/css/comparisons.css" in html
    assert "<script>" not in html  # no inline script: only src= scripts
    # each side's name isolated: a right-to-left override in one does not reorder the other
    assert f"<h2><bdi>{base.key}</bdi> → <bdi>{cand.key}</bdi></h2>" in html


def test_the_page_marks_an_invalid_comparison_with_its_reasons(client_logged_in):
    base = build_side("base", {"a": [1.0], "b": [1.0]})
    cand = build_side("cand", {"b": [1.0], "c": [0.0]})
    html = client_logged_in.get(f"/comparisons/?baseline={base.pk}&candidate={cand.pk}").content.decode()
    assert "<h2>Not comparable</h2>" in html
    assert "task sets differ: 1 task(s) only in baseline, 1 only in candidate" in html


def test_the_matrix_sorts_by_the_url(client_logged_in):
    base = build_side("base", {"a": [0.5], "b": [0.5], "c": [0.5]})
    cand = build_side("cand", {"a": [0.7], "b": [0.1], "c": [0.9]})
    url = f"/comparisons/?baseline={base.pk}&candidate={cand.pk}"

    def order(sort):
        html = client_logged_in.get(f"{url}&sort={sort}").content.decode()
        body = html.split('class="matrix"')[1]
        return re.findall(r"<td>([abc])(?:<| )", body)

    assert order("delta") == ["b", "a", "c"]
    assert order("-delta") == ["c", "a", "b"]
    assert order("-task") == ["c", "b", "a"]


def test_a_matrix_cell_leads_to_that_tasks_trials(client_logged_in, sides):
    base, cand = sides
    html = client_logged_in.get(f"/comparisons/?baseline={base.pk}&candidate={cand.pk}").content.decode()
    cell = re.search(rf'class="cell-link" href="(/trials/\?configuration={cand.pk}&amp;task=t3)"', html)
    assert cell
    listing = client_logged_in.get(cell.group(1).replace("&amp;", "&")).content.decode()
    shown = {int(pk) for pk in re.findall(r'href="/trials/(\d+)/', listing)}
    assert shown == set(cand.trials.filter(task__name="t3").values_list("pk", flat=True))


def test_plotly_js_is_served_from_our_static_files(client_logged_in):
    from django.contrib.staticfiles import finders

    assert finders.find("plotly/plotly-benchviewer.min.js")
    assert finders.find("js/comparison.js")


def test_the_picker_preselects_configurations_by_role_the_largest_of_each(client_logged_in, sides):
    base, cand = sides
    build_side("aaa-small", {"t0": [1.0]}, role="baseline")  # sorts first, but has one trial
    html = client_logged_in.get("/comparisons/").content.decode()
    assert f'<option value="{base.pk}" selected>' in html
    assert f'<option value="{cand.pk}" selected>' in html


def test_the_picker_offers_the_configurations_and_jobs_with_trials_each_with_its_count(client_logged_in, sides):
    from trials.models import Configuration, Job

    base, cand = sides
    empty = Configuration.objects.create(key="no-trials-yet", role="baseline")
    html = client_logged_in.get("/comparisons/").content.decode()
    assert html.count(f"{base.key} (baseline) · {base.trials.count()} trials</option>") == 2  # in both pickers
    assert html.count(f"{cand.key} (candidate) · {cand.trials.count()} trials</option>") == 2
    assert empty.key not in html
    jobs = Job.objects.filter(trials__isnull=False).distinct()
    assert jobs.exists()
    for job in jobs:
        assert html.count(f"#{job.pk} ({job.source_format}) · {job.trials.count()} trials</option>") == 2


def test_the_demo_jobs_compare_end_to_end_through_the_importer(client_logged_in, tmp_path):
    from tests.builders import import_path
    from trials.demo import write_demo
    from trials.models import Configuration

    write_demo(tmp_path / "demo", tasks=4, attempts=2, seed=0)
    for job_dir in sorted((tmp_path / "demo").iterdir()):
        import_path(job_dir)
    base = Configuration.objects.get(role="baseline")
    cand = Configuration.objects.get(role="candidate")
    body = client_logged_in.get(f"/api/comparisons/?baseline={base.pk}&candidate={cand.pk}").json()
    c = body["comparison"]
    assert c["valid"] is True and c["pairedTasks"] == 4
    assert "measurement mode unknown" in c["headlineReasons"]
    assert body["baseline"]["metrics"]["trials"] == 8 and body["candidate"]["metrics"]["trials"] == 8
    page = client_logged_in.get(f"/comparisons/?baseline={base.pk}&candidate={cand.pk}")
    assert page.status_code == 200


def test_an_evidence_pack_joined_later_makes_the_cached_comparison_stale(tmp_path):
    """A join can change only the trial's documents (here the P0 QC-gate count the promotion guard reads)."""
    trial_dir = write_trial(tmp_path / "job", "tool-approval__AAAAAAA")
    import_path(tmp_path / "job")
    pack = orjson.loads((REFERENCE / "lime-agentruntime" / "benchmark-trial-pack.json").read_bytes())
    pack["benchmark"]["trialId"] = trial_dir.name
    (tmp_path / "first.json").write_bytes(orjson.dumps(pack))
    import_path(tmp_path / "first.json")
    side = Side("job", Trial.objects.get().job_id)
    before, complete_before = cache.fingerprint(side, side), Trial.objects.get().is_complete

    pack["decisionInputs"]["p0QcGateRegressionCount"] = 3
    (tmp_path / "second.json").write_bytes(orjson.dumps(pack))
    assert import_path(tmp_path / "second.json").outcomes[0]["joined"] == 1
    trial = Trial.objects.get()
    assert trial.documents["evidence_pack"]["decisionInputs"]["p0QcGateRegressionCount"] == 3
    assert trial.is_complete == complete_before  # nothing the old fingerprint counted has changed
    assert cache.fingerprint(side, side) != before
