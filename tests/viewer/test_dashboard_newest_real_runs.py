"""The dashboard's Jobs and Configurations panels show the newest first, with a link to all (issue 39).

Three real runs are imported one after the other; each panel must list the last one first, as the job list
does, and link to every job and every configuration. The runs' names are read from their own files."""

from __future__ import annotations

import json
import re

import pytest

from tests.builders import REFERENCE, import_path

pytestmark = pytest.mark.django_db

INSPECT = REFERENCE / "inspect" / "2025-05-12T20-28-26-04-00_security-guide.json"
GEMINI = REFERENCE / "public-runs-1" / "skillsbench-gemini-cli" / "gemini-cli-gemini3flash-noskills-3d-scan-calc-a2c944"
CHECK = REFERENCE / "public-runs-2" / "harbor-check-claude-code-notloggedin" / "2026-09-30__08-59-24"
JOB_LINK = re.compile(r'<tr><td><a href="/jobs/(\d+)/">([^<]*)</a>')
CONFIGURATION_LINK = re.compile(r'<tr><td><a href="/trials/\?configuration=(\d+)">')
TRIAL_JOB = re.compile(r'class="job-link" href="/jobs/\d+/">')


def panel(html: str, heading: str) -> str:
    start = html.index(f"<h2>{heading} ")
    return html[start : html.index("</section>", start)]


def job_names_in_import_order() -> list[str]:
    """What names each run's job: the Inspect task, the Harbor job folders."""
    return [json.loads(INSPECT.read_text())["eval"]["task"], GEMINI.name, CHECK.name]


def test_the_dashboard_lists_the_newest_jobs_and_configurations_first(client_logged_in):
    for run in (INSPECT, GEMINI, CHECK):
        import_path(run)
    html = client_logged_in.get("/").content.decode()
    jobs = JOB_LINK.findall(panel(html, "Jobs"))
    newest_first = list(reversed(job_names_in_import_order()))
    assert len(jobs) == 3
    for (_, shown), name in zip(jobs, newest_first, strict=True):
        assert shown.startswith(name), (shown, name)
    assert 'id="all-jobs">all 3 jobs' in html
    listed = JOB_LINK.findall(client_logged_in.get("/jobs/").content.decode())
    assert listed == jobs  # (the panel is the job list's first rows)

    configurations = CONFIGURATION_LINK.findall(panel(html, "Configurations"))
    assert len(configurations) == 3 and 'id="all-configurations">all 3 configurations' in html
    for pk, (job_pk, _) in zip(configurations, jobs, strict=True):  # each one's trials are of that job
        trials = client_logged_in.get(f"/trials/?configuration={pk}").content.decode()
        assert f'class="job-link" href="/jobs/{job_pk}/">' in trials
        assert len(TRIAL_JOB.findall(trials)) == len(re.findall(f'href="/jobs/{job_pk}/"', trials))
    page = client_logged_in.get("/configurations/").content.decode()
    assert CONFIGURATION_LINK.findall(page) == configurations
