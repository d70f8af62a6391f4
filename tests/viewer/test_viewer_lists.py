"""Dashboard, jobs, job page and trial list: filters and sort in the URL, prev / next trial."""

from __future__ import annotations

import re

import orjson
import pytest
from django.db.models import F
from django.urls import reverse

from tests.builders import REFERENCE, demo_jobs, import_path
from tests.factories import TrialFactory
from trials.models import Job, Trial

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo(tmp_path):
    root = demo_jobs(tmp_path)
    import_path(root / "baseline-job")
    import_path(root / "candidate-job")
    return root


def trial_links(html: str) -> list[str]:
    return re.findall(r'<a class="trial-link" href="/trials/\d+/[^"]*">([^<]+)</a>', html)


def test_the_dashboard_shows_imports_jobs_datasets_configurations_and_failures(client_logged_in, demo):
    html = client_logged_in.get(reverse("home")).content.decode()
    for text in ("baseline-job", "candidate-job", "benchviewer-demo/terminal-tasks", "baseline-feedback-v1"):
        assert text in html
    assert "Failures by class" in html
    assert 'id="untriaged"' in html


def test_untriaged_means_no_qc_item_on_the_dashboard_the_list_and_the_queue(client_logged_in, demo):
    from tests.builders import make_user
    from trials.triage import services as triage
    from trials.triage.forms import FeedbackForm

    triaged, *others = Trial.objects.failures().order_by("pk")  # failed, or flagged whatever the reward
    triager = make_user("tina", "triager")
    data = {"kind": "release-blocker", "category": "runtime", "severity": "P1"}
    data["evidence_refs"] = [f"trial:{triaged.key}"]
    form = FeedbackForm(data=data, trial=triaged, user=triager)
    assert form.is_valid(), form.errors
    triage.file_item(triager, triaged, form.cleaned_data)

    html = client_logged_in.get(reverse("home")).content.decode()
    assert f"{len(others)} untriaged failures" in html
    listed = client_logged_in.get(reverse("trial-list"), {"untriaged": "1", "page_size": 500}).content.decode()
    assert triaged.name not in trial_links(listed) and others[0].name in trial_links(listed)
    assert Trial.objects.untriaged().count() == len(others)


def _class_cells(html: str) -> dict[str, tuple[int, str, int, str]]:
    """The dashboard's failures by class: class -> (trials, their link, clusters, their link)."""
    rows = re.findall(
        r'<tr data-class="(\w+)">.*?href="([^"]+)" class="class-trials">([\d,]+) trials?</a>'
        r'.*?href="([^"]+)" class="class-clusters">([\d,]+) clusters?</a>',
        html.split('id="failures-by-class"')[1].split("</section>")[0],
    )
    return {c: (int(n.replace(",", "")), t.replace("&amp;", "&"), int(k), u) for c, t, n, u, k in rows}


def test_the_dashboard_counts_failures_by_class_as_the_clusters_page_and_opens_them(client_logged_in):
    # mini-swe-agent on TB1: is_resolved false (failed) or null (unscored) is a failure; a resolved row whose
    # agent timed out is a flagged pass (terminal-bench-1/README.md)
    run = REFERENCE / "terminal-bench-1" / "20250825_swe-agent-mini_claude-4-sonnet"
    rows = orjson.loads(next(run.glob("*/results.json")).read_bytes())["results"]
    failures = sum(1 for r in rows if r["is_resolved"] is not True)
    flagged_passes = sum(1 for r in rows if r["is_resolved"] is True and r["failure_mode"] == "agent_timeout")
    assert (failures, flagged_passes) == (69, 9)
    import_path(run)
    cells = _class_cells(client_logged_in.get(reverse("home")).content.decode())
    assert "Failures by category" not in client_logged_in.get(reverse("home")).content.decode()
    assert cells["flagged_pass"][0] == flagged_passes
    assert sum(n for c, (n, *_) in cells.items() if c != "flagged_pass") == failures
    clusters = client_logged_in.get(reverse("qc-clusters")).content.decode()
    for failure_class, (trials, trials_url, count, clusters_url) in cells.items():
        # the clusters page's class tab says the same numbers
        assert re.search(
            rf'data-class="{failure_class}"><span[^>]*>[^<]+</span> {count} clusters?, {trials} trials?</a>', clusters
        ), failure_class
        assert clusters_url == f"/qc/clusters/?class={failure_class}"
        listed = client_logged_in.get(trials_url).content.decode()
        expected = set(Trial.objects.filter(cluster__failure_class=failure_class).values_list("name", flat=True))
        assert f'Trials <span class="muted">({trials})</span>' in listed and len(expected) == trials
        assert trial_links(listed) and set(trial_links(listed)) <= expected  # (its first page of 50)
        assert f"in a failure cluster of class {failure_class.replace('_', ' ')}" in listed


def test_the_jobs_list_shows_counts_and_mean_reward(client_logged_in, demo):
    html = client_logged_in.get(reverse("job-list")).content.decode()
    assert "baseline-job" in html and "Mean reward (per trial)" in html  # a comparison's is per task
    job = Job.objects.get(name="baseline-job")
    page = client_logged_in.get(job.get_absolute_url()).content.decode()
    assert "mean reward per scored trial" in page and "(a comparison averages per task)" in page


def test_the_jobs_lists_trial_and_failure_counts_link_to_the_trials_they_count(client_logged_in, demo):
    job = Job.objects.get(name="baseline-job")
    failed = job.trials.filter(status__in=Trial.FAILED_STATUSES).count()
    html = client_logged_in.get(reverse("job-list")).content.decode()
    row = html[html.index(f">{job.name}</a>") :]
    for css, expected in (("job-trials", job.trials.count()), ("job-failed", failed)):
        link = re.search(rf'class="{css}" href="([^"]+)">(\d+)</a>', row)
        listed = client_logged_in.get(link.group(1).replace("&amp;", "&")).content.decode()
        assert int(link.group(2)) == expected
        assert f'Trials <span class="muted">({expected})</span>' in listed
    home = client_logged_in.get(reverse("home")).content.decode()
    assert f'href="/trials/?job={job.pk}">{job.trials.count()} trials</a>' in home


def test_the_job_pages_mean_reward_says_it_leaves_unscored_trials_out(client_logged_in):
    scored = TrialFactory(reward=1.0)
    TrialFactory(job=scored.job, reward=0.0)
    TrialFactory(job=scored.job, reward=None, status="errored")
    html = client_logged_in.get(reverse("job-detail", args=[scored.job.pk])).content.decode()
    assert "mean reward per scored trial 0.500" in html  # not 0.333: the errored trial has no score


def test_the_job_page_has_a_per_task_results_table(client_logged_in, demo):
    job = Job.objects.get(name="candidate-job")
    html = client_logged_in.get(reverse("job-detail", args=[job.pk])).content.decode()
    table = html[html.index('id="task-results"') :]
    for trial in job.trials.all():
        assert trial.task.name in table
    assert re.search(r"<td><a href=[^>]+>\d</a> / \d</td>", table)  # pass count
    errored = job.trials.exclude(exception_type="").first()
    assert f"<code>{errored.exception_type}</code>" in table


def test_the_job_page_shows_no_token_count_for_a_task_whose_trials_counted_none(client_logged_in):
    counted = TrialFactory(input_tokens=1200, output_tokens=34)
    job = counted.job
    TrialFactory(job=job, task=counted.task, input_tokens=None, output_tokens=None)
    uncounted = TrialFactory(job=job, input_tokens=None, output_tokens=None)
    html = client_logged_in.get(reverse("job-detail", args=[job.pk])).content.decode()

    def row(task_name: str) -> str:
        rest = html[html.index(f">{task_name}</a></td>") :]
        return rest[: rest.index("</tr>")]

    assert "<td>1,234</td>" in row(counted.task.name)
    assert "<td>0</td>" not in row(uncounted.task.name) and "<td>–</td>" in row(uncounted.task.name)


def test_the_job_pages_pass_counts_link_to_the_trials_they_count(client_logged_in, demo):
    job = Job.objects.get(name="candidate-job")
    html = client_logged_in.get(reverse("job-detail", args=[job.pk])).content.decode()
    href = re.search(r'id="passed-count" href="([^"]+)"', html).group(1).replace("&amp;", "&")
    passed = job.trials.filter(status=Trial.Status.PASSED)
    assert passed.exists() and f">{passed.count()} passed</a>" in html
    assert sorted(trial_links(client_logged_in.get(href).content.decode())) == sorted(t.name for t in passed)
    task = passed.first().task
    row = re.search(r'href="([^"]+passes=true[^"]+)">(\d+)</a> / ', html[html.index(f">{task.name}</a>") :])
    counted = client_logged_in.get(row.group(1).replace("&amp;", "&")).content.decode()
    assert len(trial_links(counted)) == int(row.group(2)) == passed.filter(task=task).count()


def test_the_job_page_filters_and_sorts_from_the_url(client_logged_in, demo):
    job = Job.objects.get(name="candidate-job")
    tasks = sorted(job.trials.values_list("task__name", flat=True))
    url = reverse("job-detail", args=[job.pk])
    html = client_logged_in.get(url, {"q": tasks[0][:8]}).content.decode()
    assert tasks[0] in html and tasks[1] not in html
    by_reward = client_logged_in.get(url, {"sort": "-reward"}).content.decode()
    # The page puts trials without a reward last on every database (SQLite does so for "-reward"
    # by itself, PostgreSQL puts NULL first).
    rewards = job.trials.order_by(F("reward").desc(nulls_last=True)).values_list("task__name", flat=True)
    first, second = (by_reward.index(f">{name}</a>") for name in rewards)
    assert first < second
    assert "sort=reward" in by_reward  # the header link flips the order


def test_the_trial_list_filters_by_every_field_in_the_url(client_logged_in, demo):
    url = reverse("trial-list")
    everything = trial_links(client_logged_in.get(url).content.decode())
    assert len(everything) == 4
    assert len(trial_links(client_logged_in.get(url, {"role": "candidate"}).content.decode())) == 2
    assert (
        len(trial_links(client_logged_in.get(url, {"dataset": "benchviewer-demo/terminal-tasks"}).content.decode()))
        == 4
    )
    assert len(trial_links(client_logged_in.get(url, {"configuration": "baseline-feedback-v1"}).content.decode())) == 2
    task = Trial.objects.first().task.name
    assert len(trial_links(client_logged_in.get(url, {"task": task}).content.decode())) == 2
    passed = Trial.objects.filter(status="passed").count()
    assert len(trial_links(client_logged_in.get(url, {"status": "passed"}).content.decode())) == passed
    high = Trial.objects.filter(reward__gte=0.5).count()
    assert len(trial_links(client_logged_in.get(url, {"reward_min": "0.5"}).content.decode())) == high
    category = Trial.objects.exclude(failure_category="").first().failure_category
    n = Trial.objects.filter(failure_category=category).count()
    assert len(trial_links(client_logged_in.get(url, {"failure_category": category}).content.decode())) == n
    complete = Trial.objects.filter(is_complete=True).count()
    assert len(trial_links(client_logged_in.get(url, {"complete": "true"}).content.decode())) == complete


def test_the_trial_list_sorts_from_the_url(client_logged_in, demo):
    html = client_logged_in.get(reverse("trial-list"), {"sort": "name"}).content.decode()
    assert trial_links(html) == sorted(Trial.objects.values_list("name", flat=True))
    html = client_logged_in.get(reverse("trial-list"), {"sort": "-reward"}).content.decode()
    expected = [t.name for t in Trial.objects.all() if t.reward is not None]
    expected.sort(key=lambda name: -Trial.objects.get(name=name).reward)
    assert trial_links(html)[: len(expected)][0] == expected[0]


def test_trial_links_carry_the_list_they_came_from(client_logged_in, demo):
    html = client_logged_in.get(
        reverse("trial-list"), {"role": "candidate", "sort": "name", "page": "1"}
    ).content.decode()
    assert "?list=role%3Dcandidate%26sort%3Dname" in html


def test_a_trial_knows_its_position_and_neighbours_in_its_list(client_logged_in, demo):
    names = sorted(Trial.objects.values_list("name", flat=True))
    second = Trial.objects.get(name=names[1])
    html = client_logged_in.get(
        reverse("trial-detail", args=[second.pk]), {"list": "sort=name", "tab": "verifier"}
    ).content.decode()
    assert '<span id="trial-position">2 / 4</span>' in html
    prev_pk = Trial.objects.get(name=names[0]).pk
    next_pk = Trial.objects.get(name=names[2]).pk
    kept = "?list=sort%3Dname&amp;tab=verifier#tab-verifier"  # the list, the tab, and landing on its panel
    assert f'id="prev-trial" data-key="ArrowLeft" href="/trials/{prev_pk}/{kept}"' in html
    assert f'id="next-trial" data-key="ArrowRight" href="/trials/{next_pk}/{kept}"' in html


def test_the_first_trial_of_a_list_has_no_previous(client_logged_in, demo):
    first = Trial.objects.order_by("name").first()
    html = client_logged_in.get(reverse("trial-detail", args=[first.pk]), {"list": "sort=name"}).content.decode()
    assert 'id="prev-trial"' not in html
    assert "1 / 4" in html


def test_a_trial_outside_its_list_says_so(client_logged_in, demo):
    baseline = Trial.objects.filter(configuration__role="baseline").first()
    html = client_logged_in.get(
        reverse("trial-detail", args=[baseline.pk]), {"list": "role=candidate"}
    ).content.decode()
    assert "not in list" in html


def test_the_list_filters_start_unset_so_pressing_filter_changes_nothing(client_logged_in, demo):
    html = client_logged_in.get(reverse("trial-list")).content.decode()
    form = html[html.index('id="trial-filters"') : html.index("</form>", html.index('id="trial-filters"'))]
    selects = re.findall(r"<select[^>]*>.*?</select>", form, re.S)
    assert any('name="complete"' in select for select in selects)
    for select in (s for s in selects if 'name="sort"' not in s):  # sorting has no "any"
        chosen = re.findall(r'<option value="([^"]*)" selected>', select)
        assert chosen == ([] if " multiple" in select.split(">")[0] else [""]), select[:200]


def test_the_job_page_and_the_jobs_list_show_a_start_written_without_a_time_zone_as_written(client_logged_in):
    folder = (
        REFERENCE / "public-runs-1" / "skillsbench-gemini-cli" / "gemini-cli-gemini3flash-noskills-3d-scan-calc-a2c944"
    )
    written = orjson.loads((folder / "result.json").read_bytes())["started_at"]
    assert "+" not in written and not written.endswith("Z")  # this real job's start names no time zone
    import_path(folder)
    job = Job.objects.get()
    assert job.started_at is None  # never assumed UTC, so not indexed
    assert job.started_as_written == written
    shown = f'{written} <span class="muted" title="the file gives no time zone">(as written)</span>'
    for url in (reverse("job-detail", args=[job.pk]), reverse("job-list")):
        assert shown in client_logged_in.get(url).content.decode(), url


def test_the_job_filter_takes_the_job_name_as_well_as_its_id(client_logged_in, demo):
    job = Job.objects.get(name="candidate-job")
    by_name = client_logged_in.get(reverse("trial-list"), {"job": "candidate-job", "page_size": 500}).content.decode()
    by_id = client_logged_in.get(reverse("trial-list"), {"job": job.pk, "page_size": 500}).content.decode()
    names = sorted(job.trials.values_list("name", flat=True))
    assert sorted(trial_links(by_name)) == sorted(trial_links(by_id)) == names


def test_a_missing_step_and_a_refused_page_are_pages_of_the_site(client_logged_in, demo):
    from tests.builders import make_user

    trial = Trial.objects.first()
    missing = client_logged_in.get(reverse("trial-step", args=[trial.pk, 99_999]))
    assert missing.status_code == 404
    html = missing.content.decode()
    assert "no such step" in html and 'href="/trials/"' in html  # the site's navigation, not a bare page
    client_logged_in.force_login(make_user("vera", "viewer"))
    refused = client_logged_in.get(reverse("triage-feedback", args=[trial.pk]))
    assert refused.status_code == 403 and "Not allowed" in refused.content.decode()


@pytest.mark.django_db(transaction=True)
def test_the_migration_keeps_the_start_of_jobs_imported_before_it_as_written():
    from tests.builders import migrate_to

    old_job = migrate_to(("trials", "0008_trajectory_max_step_tokens")).get_model("trials", "Job")
    old_job.objects.create(key="k", name="j", source_format="harbor", result={"started_at": "2026-01-02T03:04:05"})
    migrate_to()
    assert Job.objects.get(key="k").started_as_written == "2026-01-02T03:04:05"
