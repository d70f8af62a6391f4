"""A shared comparison reads as the signed-in comparison page does: the decision first, the same captions and
explanations, on the real TB1 runs (mini-swe-agent against droid + claude-4.1-opus); only its links out are gone.

The known answers are computed from the raw `results.json` rows (`is_resolved` null: unscored, left out).
"""

from __future__ import annotations

import html as htmllib
import re
from statistics import fmean

import pytest
from django.test import Client

from tests.builders import REFERENCE, import_path, make_user, tb1_rows
from trials.models import Configuration

pytestmark = pytest.mark.django_db

MINI = REFERENCE / "terminal-bench-1" / "20250825_swe-agent-mini_claude-4-sonnet"
OPUS = REFERENCE / "public-runs-2" / "tb1-droid-5x2" / "20250923_droid_claude-4-1-opus"


def _section(page: str, element_id: str) -> str:
    """The `<section id=…>` of the page, its tags dropped and its spaces collapsed: what a reader reads."""
    match = re.search(rf'<section[^>]*id="{element_id}"[^>]*>(.*?)</section>', page, re.S)
    assert match, f"no section #{element_id}"
    return " ".join(htmllib.unescape(re.sub(r"<[^>]+>", " ", match.group(1))).split())


def _task_means(rows: list[dict]) -> dict[str, float]:
    by_task: dict[str, list[float]] = {}
    for row in rows:
        if row["is_resolved"] is not None:
            by_task.setdefault(row["task_id"], []).append(float(row["is_resolved"]))
    return {task: fmean(values) for task, values in by_task.items()}


@pytest.fixture
def pages() -> dict[str, str]:
    import_path(MINI)
    import_path(OPUS)
    base, cand = (Configuration.objects.get(key=folder.name).pk for folder in (MINI, OPUS))
    reviewer = Client()
    reviewer.force_login(make_user("rhea", "reviewer"))
    signed_in = reviewer.get(f"/comparisons/?baseline={base}&candidate={cand}").content.decode()
    made = reviewer.post(
        "/api/shares/", {"comparison": {"baseline": base, "candidate": cand}}, content_type="application/json"
    )
    assert made.status_code == 201, made.content
    url = made.json()["url"].removeprefix("http://testserver")
    shared = Client().get(url)
    assert shared.status_code == 200
    return {"signed_in": signed_in, "shared": shared.content.decode(), "url": url}


def test_a_shared_comparison_puts_the_decision_first_in_the_pages_own_words(pages):
    shared, signed_in = pages["shared"], pages["signed_in"]
    mini, opus = _task_means(tb1_rows(MINI)), _task_means(tb1_rows(OPUS))
    paired = mini.keys() & opus.keys()
    delta = fmean(opus[t] - mini[t] for t in paired)
    headline = _section(shared, "headline")
    # the decision and its reason come before any figure, as on the page
    assert headline.split(" Decision ")[0].count("Mean reward") == 0
    assert shared.index('id="decision-reason"') < shared.index('id="decision"') < shared.index('id="mean-reward-delta"')
    assert re.search(r'id="decision"[^>]*><span class="label">Decision</span><span class="value">promote<', shared)
    assert f"Mean reward Δ, paired {delta:+.3f} a task, over the {len(paired)} tasks both sides scored" in headline
    assert f"{delta:+.3f}" == "+0.430" and len(paired) == 47
    # every section the two share reads word for word the same (the page's Share button aside)
    after_title = headline.split(" ", 3)[3]  # (the labels are configuration keys, one word each)
    assert after_title.startswith("Promote: ") and _section(signed_in, "headline").endswith(after_title)
    for element_id in ("validity", "guard", "figures"):
        assert _section(shared, element_id) == _section(signed_in, element_id).removesuffix(" JSON"), element_id
    assert "not paired; paired over the 47 tasks both scored: +0.430" in _section(shared, "figures")


def test_a_shared_comparison_links_nowhere_a_visitor_cannot_go(pages):
    main = pages["shared"].split("<main>")[1]
    hrefs = set(re.findall(r'href="([^"]*)"', main))
    # within the page, the matrix's own sorts and pages, and the report download: nothing asking for a login
    assert hrefs and all(h.startswith(("#", "?", pages["url"])) for h in hrefs), hrefs
    assert 'id="figure-paired-tasks">47 tasks both sides scored</span>' in main  # a figure kept, as words
