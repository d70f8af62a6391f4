"""The SkillsBench job's counts agree, each by one rule, and link to the trials they count (issue 39).

Its result.json names 425 trials; 390 have a reward (`reward_stats`), so 35 are unscored (no reward, an
errored one too), where the page said "1 unscored". A trial passes at reward 1.0 however its run ended
(docs/importing.md, the comparisons' rule): the 39 rewards of 1.0 include one run that timed out
(AgentTimeoutError) and still scored 1.0, which the page counted as not passed without a word. Known
answers are read from the job's own result.json."""

from __future__ import annotations

import html
import json
import re

import pytest

from tests.builders import REFERENCE, every_page, import_path

pytestmark = pytest.mark.django_db

JOB = REFERENCE / "public-runs-1" / "skillsbench-claude-code-minimax" / "no_skills"
PASS_REWARD = 1.0
TRIAL_LINK = re.compile(r'<a class="trial-link" href="(/trials/\d+/)[^"]*">([^<]+)</a>')


def raw() -> tuple[int, dict[str, float], dict[str, str]]:
    """(trials in all, {name: reward}, {name: exception type}) as the job's result.json has them."""
    result = json.loads((JOB / "result.json").read_text())
    [stats] = result["stats"]["evals"].values()
    rewards = {n: float(v) for b in stats["reward_stats"].values() for v, names in b.items() for n in names}
    exceptions = {n: e for e, names in stats["exception_stats"].items() for n in names}
    return result["n_total_trials"], rewards, exceptions


def link(page: str, anchor: str) -> tuple[str, int]:
    """The href and the number of the count whose id is `anchor`."""
    found = re.search(rf'id="{anchor}" href="([^"]+)">([\d,]+)', page)
    assert found, anchor
    return html.unescape(found.group(1)), int(found.group(2).replace(",", ""))


def listed(client, url: str) -> dict[str, str]:
    """{trial name: its page} of every trial the list at `url` holds, page after page."""
    found: dict[str, str] = {}
    for number in range(1, 20):
        page = client.get(f"{url}&page={number}")
        found |= {name: href for href, name in TRIAL_LINK.findall(page.content.decode())}
        if not page.context["page"].has_next():
            return found
    raise AssertionError("more than 19 pages")


def test_the_jobs_counts_agree_and_each_links_to_the_trials_it_counts(client_logged_in):
    import_path(JOB)
    total, rewards, exceptions = raw()
    passed = {n for n, r in rewards.items() if r >= PASS_REWARD}
    unscored = total - len(rewards)
    assert (total, len(rewards), unscored, len(passed)) == (425, 390, 35, 39)
    [job] = set(re.findall(r'href="/jobs/(\d+)/"', client_logged_in.get("/jobs/").content.decode()))
    page = client_logged_in.get(f"/jobs/{job}/").content.decode()

    href, shown = link(page, "unscored-count")
    assert shown == unscored and f"{unscored} unscored</a> count as not passed" in page
    assert set(listed(client_logged_in, href)) == {n for n in exceptions if n not in rewards}
    href, shown = link(page, "scored-count")
    assert shown == len(rewards) == len(listed(client_logged_in, href))
    href, shown = link(page, "passed-count")
    assert shown == len(passed) and set(listed(client_logged_in, href)) == passed
    assert f'<dd id="job-accuracy">{len(passed) / total:.4f} ' in page

    # The pass that timed out: counted, and said so where it is counted and on its own page.
    timed_out = {n for n in passed if "Timeout" in exceptions.get(n, "")}
    assert len(timed_out) == 1
    href, shown = link(page, "passed-flagged-count")
    flagged = listed(client_logged_in, href)
    assert shown == 1 and set(flagged) == timed_out
    assert "a trial passes at reward ≥ 1.0, however its run ended" in page
    [name] = timed_out
    trial = client_logged_in.get(flagged[name]).content.decode()
    note = re.search(r'<p class="note" id="pass-rule">([^<]+)</p>', trial).group(1)
    assert note.startswith("Counted as passed: a trial passes at reward ≥ 1.0 however its run ended")
    assert f"scored {rewards[name]} though its run timed out ({exceptions[name]})" in html.unescape(note)
    assert 'id="failure-class"' not in trial  # (it passed: no failure class; its cluster is a flagged pass's)
    pk = int(flagged[name].split("/")[2])
    [cluster] = [c for c in every_page(client_logged_in, "/api/qc/clusters/?page_size=100") if pk in c["trials"]]
    assert cluster["failure_class"] == "flagged_pass" and cluster["count"] == 1

    # A timeout that scored 0 failed plainly: nothing to explain on its page.
    zero = sorted(n for n, e in exceptions.items() if "Timeout" in e and rewards.get(n) == 0.0)[0]
    failed = listed(client_logged_in, f"/trials/?job={job}&task={zero.rsplit('__', 1)[0]}")
    assert 'id="pass-rule"' not in client_logged_in.get(failed[zero]).content.decode()
