"""Names that read at real volumes, on the shared TB1 droid runs: jobs name agent and model, queue rows of
sonnet and opus stay apart, the trial list's id filters name what they are, durations not to 3 decimals."""

from __future__ import annotations

import json
import re

import pytest

from tests.builders import REFERENCE, import_path
from trials.models import Configuration, Job

pytestmark = pytest.mark.django_db

DROID = REFERENCE / "public-runs-2" / "tb1-droid-5x2"


def _metadata(run):
    return json.loads((run / "run_metadata.json").read_text())


@pytest.fixture
def droid_runs():
    for submission in sorted(DROID.iterdir()):
        if submission.is_dir():
            import_path(submission)
    return {run.name: _metadata(run) for run in DROID.glob("*/*") if (run / "run_metadata.json").is_file()}


def test_the_job_list_and_job_page_name_each_jobs_agent(client_logged_in, droid_runs):
    html = client_logged_in.get("/jobs/").content.decode()
    for run_id, meta in droid_runs.items():
        job = Job.objects.get(name=run_id)
        row = html[html.index(f'href="{job.get_absolute_url()}"') :]
        cell = row[row.index('class="job-agents"') : row.index("</td>", row.index('class="job-agents"'))]
        assert meta["agent_name"].lower() in cell.lower() or "Factory Droid" in cell, (run_id, cell)
        page = client_logged_in.get(job.get_absolute_url()).content.decode()
        assert 'class="job-agents"' in page and job.trials.first().configuration.key in page


def test_queue_rows_of_sonnet_and_opus_read_apart(client_logged_in, droid_runs):
    shown = {}
    for key in Configuration.objects.values_list("key", flat=True):
        html = client_logged_in.get("/triage/", {"configuration": key}).content.decode()
        cell = r'<td class="name-cut" title="(20250923_droid_[^"]+)"><span[^>]*>(.*?)</span></td>'  # (its two lines)
        cells = set(re.findall(cell, html))
        assert {k for k, _ in cells} == {key}
        [(_, shown[key])] = cells
    assert len(shown) == 2 and len(set(shown.values())) == 2, shown  # what a row shows differs between the two


def test_the_trial_list_names_what_an_id_filter_is_and_durations_read_in_seconds(client_logged_in, droid_runs):
    opus = next(p for p in DROID.iterdir() if p.name.endswith("opus"))  # the submission folder names it
    conf = Configuration.objects.get(key=opus.name)
    job = Job.objects.get(name=sorted(p.name for p in opus.iterdir() if p.is_dir())[0])
    html = client_logged_in.get(f"/trials/?configuration={conf.pk}&job={job.pk}").content.decode()
    start = html.index('id="trial-filters"')
    form = html[start : html.index("</form>", start)]
    # each id field shows the name chosen, its value still the id, and no box holding a bare number
    assert re.search(
        rf'<select name="configuration"[^>]*>.*?<option value="{conf.pk}" selected>{opus.name}</option>', form, re.S
    )
    assert re.search(rf'<select name="job"[^>]*>.*?<option value="{job.pk}" selected>{job.name}</option>', form, re.S)
    assert not re.search(r'<input type="text" name="(configuration|job)" value=', form)
    again = client_logged_in.get(f"/trials/?configuration={conf.pk}&job={job.pk}").context["page"].paginator.count
    assert again == job.trials.count() > 0
    assert not re.search(r"\d+\.\d{3}\s*s\b", html)
    sonnet = Configuration.objects.get(key__endswith="sonnet")
    page = client_logged_in.get(f"/comparisons/?baseline={sonnet.pk}&candidate={conf.pk}").content.decode()
    row = page[page.index("Mean duration") :][:400]
    assert re.search(r"\d+\u00a0min\u00a0\d+\u00a0s", row), row
