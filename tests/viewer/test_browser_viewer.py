"""The trial viewer in a real browser (system Chromium via Playwright): open, filter, search,
permalink, arrow keys, "show all", and agent-written markup that must never run."""

from __future__ import annotations

import os
import re
import shutil

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from playwright.sync_api import expect

from tests.builders import (
    crafted_trial_dir,
    demo_jobs,
    import_demo,
    import_path,
    import_trial_dir,
    long_trajectory,
    tool_step,
    write_trial,
)
from trials.models import Trial

# Playwright's sync API runs an event loop in this thread; Django's ORM calls are still sync.
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
pytestmark = pytest.mark.browser
expect.set_options(timeout=15_000)  # CI runs two test processes on two cores

XSS_HANDLER = '<img src=x onerror="window.__xss=1">'
XSS_SCRIPT = "<script>window.__xss=2</script>"


@pytest.fixture
def user(transactional_db):
    return get_user_model().objects.create_user("reviewer", password="pw-reviewer-1")


@pytest.fixture
def page(browser, live_server, user):
    """A logged-in page (session cookie of a forced login) that records dialogs and JS errors."""
    client = Client()
    client.force_login(user)
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900})
    context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}])
    page = context.new_page()
    page.dialogs = []
    page.errors = []
    page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    yield page
    context.close()


def no_xss_ran(page) -> bool:
    return page.dialogs == [] and page.evaluate("typeof window.__xss") == "undefined"


def test_logging_in_through_the_form_opens_the_dashboard(browser, live_server, user):
    context = browser.new_context(base_url=live_server.url)
    page = context.new_page()
    page.goto("/")
    page.fill("input[name=username]", "reviewer")
    page.fill("input[name=password]", "pw-reviewer-1")
    page.click("main button[type=submit]")
    expect(page.locator("h1")).to_have_text("Dashboard")
    context.close()


def test_a_trial_opens_with_its_steps_and_tabs(page, tmp_path):
    trial = import_trial_dir(crafted_trial_dir(tmp_path))
    page.goto(reverse("trial-detail", args=[trial.pk]))
    expect(page.locator("h1")).to_contain_text(trial.name)
    expect(page.locator("article.step")).to_have_count(trial.step_count)
    expect(page.locator("#completeness")).to_contain_text("Evidence completeness")
    page.click('.tabs a[data-tab="verifier"]')
    expect(page.locator("#tab-verifier")).to_be_visible()
    assert "tab=verifier" in page.url
    assert page.errors == []


def test_filters_hide_parts_and_survive_a_reload(page, tmp_path):
    trial = import_trial_dir(crafted_trial_dir(tmp_path))
    page.goto(reverse("trial-detail", args=[trial.pk]))
    reasoning = page.locator("article.step .reasoning").first
    expect(reasoning).to_be_visible()
    page.uncheck('input[data-hide="reasoning"]')
    expect(reasoning).to_be_hidden()
    page.uncheck('input[data-hide="system"]')
    expect(page.locator("article.step.src-system").first).to_be_hidden()
    assert "hide=reasoning%2Csystem" in page.url or "hide=reasoning,system" in page.url
    page.reload()
    expect(page.locator("article.step .reasoning").first).to_be_hidden()
    expect(page.locator('input[data-hide="reasoning"]')).not_to_be_checked()
    page.check('input[data-hide="reasoning"]')
    expect(page.locator("article.step .reasoning").first).to_be_visible()


def test_search_finds_a_step_on_another_page_and_jumps_to_it(page, tmp_path):
    trial = long_trajectory(tmp_path, 120, planted={104: "unique-needle-text"})
    page.goto(reverse("trial-detail", args=[trial.pk]))
    page.fill('input[name="q"]', "unique-needle")
    page.press('input[name="q"]', "Enter")
    expect(page.locator("#search-results a.match")).to_have_count(1)
    page.click("#search-results a.match")
    expect(page.locator("#step-105")).to_have_class(re.compile(r"\bfocused\b"))
    expect(page.locator("#step-105")).to_be_in_viewport()
    assert re.search(r"/steps/105/", page.url)


def test_search_match_text_is_highlighted_and_n_moves_between_matches(page, tmp_path):
    trial = long_trajectory(tmp_path, 40)
    page.goto(reverse("trial-detail", args=[trial.pk]) + "?q=read_file")
    expect(page.locator("#steps mark").first).to_be_visible()
    first = page.locator("#search-results a.match").first.get_attribute("data-number")
    listed = page.locator("#search-results ol.matches").text_content()  # what a copy of the list gives
    assert re.search(r"step \d+ \S+\s+step \d+", listed), listed
    page.keyboard.press("n")
    expect(page.locator(f"#step-{first}")).to_have_class(re.compile(r"\bfocused\b"))


def test_a_step_permalink_opens_scrolled_to_the_step_and_copy_link_gives_it(page, tmp_path):
    trial = long_trajectory(tmp_path, 120)
    url = reverse("trial-step", args=[trial.pk, 77])
    page.goto(url)
    target = page.locator("#step-77")
    expect(target).to_have_class(re.compile(r"\bfocused\b"))
    expect(target).to_be_in_viewport()
    expect(page.locator("#step-51")).to_have_count(1)  # the window that holds it
    target.locator("button.copy-link").click()
    expect(target.locator("button.copy-link")).to_have_attribute("data-copied", re.compile(re.escape(url) + "$"))
    page.goto(reverse("trial-detail", args=[trial.pk]) + "?page=2#step-90")  # an anchor survives reload
    page.reload()
    expect(page.locator("#step-90")).to_have_class(re.compile(r"\bfocused\b"))


def test_arrow_keys_move_between_trials_of_the_list_keeping_the_tab(page, tmp_path):
    import_path(demo_jobs(tmp_path) / "candidate-job")
    names = sorted(Trial.objects.values_list("name", flat=True))
    page.goto(reverse("trial-list") + "?sort=name")
    page.click(f'a.trial-link:has-text("{names[0]}")')
    expect(page.locator("#trial-position")).to_have_text(f"1 / {len(names)}")
    page.click('.tabs a[data-tab="verifier"]')
    expect(page.locator("#tab-verifier")).to_be_visible()  # the tab is open before the key is pressed
    expect(page.locator("html[data-keys=on]")).to_have_count(1)  # (and the page's keys are bound)
    page.keyboard.press("ArrowRight")
    expect(page.locator("h1")).to_contain_text(names[1])
    expect(page.locator("#trial-position")).to_have_text(f"2 / {len(names)}")
    expect(page.locator("#tab-verifier")).to_be_visible()
    expect(page.locator("html[data-keys=on]")).to_have_count(1)
    page.keyboard.press("ArrowLeft")
    expect(page.locator("h1")).to_contain_text(names[0])
    page.click('.tabs a[data-tab="trajectory"]')
    page.locator(".steps .step").first.locator("header").click()  # the reader clicks into the trajectory
    page.keyboard.press("ArrowRight")
    page.wait_for_timeout(300)
    expect(page.locator("#trial-position")).to_have_text(f"1 / {len(names)}")  # the arrow stayed in the text


def test_show_all_loads_a_long_observation_on_demand(page, tmp_path):
    trial = long_trajectory(tmp_path, 6, observation_bytes=6000)
    page.goto(reverse("trial-detail", args=[trial.pk]))
    step_id = page.locator('article.step:has(button.expand[data-field="observation"])').first.get_attribute("id")
    step = page.locator(f"#{step_id}")
    pre = step.locator('pre[data-field="observation"]').first
    assert len(pre.text_content()) == 2000
    step.locator('button.expand[data-field="observation"]').first.click()
    expect(pre).to_have_class(re.compile(r"\bopen\b"))
    assert len(pre.text_content()) >= 6000


def test_markup_in_a_tool_result_a_message_and_a_file_name_is_text_and_never_runs(page, tmp_path):
    payload = XSS_HANDLER + XSS_SCRIPT
    trial = import_trial_dir(
        crafted_trial_dir(tmp_path, message=payload, tool_result=payload, artifact_name=XSS_HANDLER + ".txt")
    )
    page.goto(reverse("trial-detail", args=[trial.pk]))
    expect(page.locator("article.step.src-user pre.text").first).to_contain_text(XSS_HANDLER)
    expect(page.locator(".call-result pre").first).to_contain_text(XSS_SCRIPT)
    assert page.locator("#steps img").count() == 0
    page.click("#expand-all")
    for button in page.locator("button.expand").all():
        button.click()
    page.wait_for_timeout(200)
    assert no_xss_ran(page)
    page.goto(reverse("trial-detail", args=[trial.pk]) + "?tab=artifacts")
    expect(page.locator("#artifacts")).to_contain_text(XSS_HANDLER + ".txt")
    assert page.locator("#artifacts img").count() == 0
    page.goto(reverse("trial-detail", args=[trial.pk]) + "?q=onerror")
    expect(page.locator("#steps mark").first).to_be_visible()  # highlighting adds text, not markup
    assert no_xss_ran(page)
    assert page.errors == []


def test_a_search_match_past_a_previews_cut_is_opened_and_highlighted(page, tmp_path):
    import orjson

    from tests.builders import atif, good_steps

    steps = good_steps()
    steps[1]["observation"]["results"][0]["content"] = "x" * 4500 + " deepneedle " + "y" * 500
    (tmp_path / "t.json").write_bytes(orjson.dumps(atif(steps)))
    import_path(tmp_path / "t.json")
    trial = Trial.objects.get(trajectories__path="t.json")
    page.goto(reverse("trial-detail", args=[trial.pk]) + "?q=deepneedle")
    page.locator("#search-results a.match").first.click()
    step = page.locator("#step-2")
    expect(step.locator('pre[data-field="observation"] mark')).to_have_text("deepneedle")
    expect(step.locator('pre[data-field="observation"]')).to_have_class(re.compile(r"\bopen\b"))


def test_the_evidence_completeness_card_wraps_its_consequences_instead_of_cutting_them(page, tmp_path):
    trial_dir = crafted_trial_dir(tmp_path)  # a Lime-carrying trial missing checks, each with a consequence
    (trial_dir / "verifier" / "reward-details.json").unlink()
    shutil.rmtree(trial_dir / "artifacts")
    trial = import_trial_dir(trial_dir)
    for width in (1400, 1280, 900):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(reverse("trial-detail", args=[trial.pk]))
        page.click("#evidence-verdict")  # the details panel is one click away
        card = page.locator("#completeness")
        expect(card.locator("tr.check.missing").first).to_be_visible()
        assert card.evaluate("el => el.scrollWidth <= el.clientWidth"), width


def test_the_dashboard_cards_keep_their_tables_inside_at_common_widths(page, tmp_path):
    for job in demo_jobs(tmp_path).iterdir():
        import_path(job)
    assert Trial.objects.exclude(exception_type="").exists()  # the untriaged card lists exception names
    for width in (1400, 1280, 1024):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto("/")
        for card in page.locator(".grid > section.card").all():
            assert card.evaluate("el => el.scrollWidth <= el.clientWidth"), (width, card.get_attribute("id"))


def test_the_first_step_is_on_screen_at_1280_by_800_and_the_details_one_click_away(page, tmp_path):
    trial = import_trial_dir(crafted_trial_dir(tmp_path))
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(reverse("trial-detail", args=[trial.pk]))
    first = page.locator("article.step").first
    expect(first).to_have_attribute("id", "step-1")
    box = first.bounding_box()
    assert box is not None and box["y"] + 40 <= 800  # its head (number, source, time) without scrolling
    for fact in ("Task", "Configuration", "Status", "Rewards", "Duration", "Tokens", "Cost", "Evidence"):
        expect(page.locator("#trial-facts .strip dt", has_text=fact)).to_be_visible()
    expect(page.locator("#trial-refs")).to_be_hidden()
    page.click("#evidence-verdict")
    expect(page.locator("#trial-refs")).to_be_visible()
    expect(page.locator("#completeness")).to_be_visible()
    assert page.errors == []


def test_j_and_k_walk_the_steps_with_their_permalinks_and_open_the_next_window(page, tmp_path):
    trial = long_trajectory(tmp_path, 52)
    page.goto(reverse("trial-detail", args=[trial.pk]))
    expect(page.locator("#key-legend")).to_contain_text("j k steps")
    for _ in range(3):
        page.keyboard.press("j")
    expect(page.locator("#step-3")).to_have_class(re.compile(r"\bfocused\b"))
    assert page.url.endswith("#step-3")
    page.keyboard.press("k")
    expect(page.locator("#step-2")).to_have_class(re.compile(r"\bfocused\b"))
    assert page.url.endswith("#step-2") and page.locator("article.step.focused").count() == 1
    page.keyboard.press("/")
    expect(page.locator('.toolbar input[type="search"]')).to_be_focused()
    page.keyboard.press("j")  # typed into the search box, not a step move
    assert page.url.endswith("#step-2")
    page.locator("#step-2").click()
    for _ in range(49):  # past step 50, the last of this window
        page.keyboard.press("j")
    page.wait_for_url(re.compile(r"page=2"))
    expect(page.locator("#step-51")).to_be_visible()
    assert page.errors == []


# --- issue 23: keyboard review, the transcript, the timeline ------------------------------------


def focused_step(page) -> str:
    return page.evaluate("document.querySelector('article.step.focused')?.id || ''")


def test_a_keyboard_only_review_of_five_trials_lands_on_the_trajectory_and_keeps_the_tab(page, tmp_path):
    import_demo(tmp_path, tasks=3, attempts=2)
    names = sorted(Trial.objects.values_list("name", flat=True))
    assert len(names) >= 6
    first = Trial.objects.get(name=names[0])
    page.goto(reverse("trial-detail", args=[first.pk]) + "?list=sort%3Dname")
    legend = page.locator("#key-legend").bounding_box()
    assert legend["height"] < 24  # one line
    for i in range(5):
        expect(page.locator("h1")).to_contain_text(names[i])
        expect(page.locator("#trial-position")).to_have_text(f"{i + 1} / {len(names)}")
        if i == 0:  # opened from the list: j starts at the first step
            page.keyboard.press("j")
        # arrived by →: the first step has the focus and is on screen, not the page top
        expect(page.locator("#step-1")).to_have_class(re.compile(r"\bfocused\b"))
        expect(page.locator("#step-1")).to_be_in_viewport()
        assert i == 0 or page.evaluate("document.activeElement.id") == "step-1"
        page.keyboard.press("j")
        expect(page.locator("#step-2")).to_have_class(re.compile(r"\bfocused\b"))
        page.keyboard.press("j")
        page.keyboard.press("k")
        expect(page.locator("#step-2")).to_have_class(re.compile(r"\bfocused\b"))
        assert page.url.endswith("#step-2")
        page.keyboard.press("ArrowRight")
    expect(page.locator("h1")).to_contain_text(names[5])
    page.keyboard.press("ArrowLeft")
    expect(page.locator("h1")).to_contain_text(names[4])
    # ] opens the next tab; ← / → keep it and land on its panel; [ goes back
    page.keyboard.press("]")
    expect(page.locator('.tabs a.active[data-tab="context"]')).to_have_count(1)
    page.keyboard.press("Alt+ArrowRight")
    expect(page.locator('.tabs a.active[data-tab="permissions"]')).to_have_count(1)
    page.keyboard.press("ArrowLeft")
    expect(page.locator("h1")).to_contain_text(names[3])
    expect(page.locator('.tabs a.active[data-tab="permissions"]')).to_have_count(1)
    expect(page.locator("#tab-permissions")).to_be_in_viewport()
    page.keyboard.press("[")
    expect(page.locator('.tabs a.active[data-tab="context"]')).to_have_count(1)
    page.keyboard.press("Alt+ArrowLeft")
    expect(page.locator('.tabs a.active[data-tab="trajectory"]')).to_have_count(1)
    expect(page.locator("#step-1")).to_have_class(re.compile(r"\bfocused\b"))
    assert page.errors == []


def test_j_past_the_end_of_a_window_opens_the_next_on_its_first_step(page, tmp_path):
    trial = long_trajectory(tmp_path, 60)
    page.goto(reverse("trial-detail", args=[trial.pk]) + "#step-50")
    expect(page.locator("#step-50")).to_have_class(re.compile(r"\bfocused\b"))
    page.keyboard.press("j")
    expect(page.locator("#step-51")).to_have_class(re.compile(r"\bfocused\b"))
    assert "page=2" in page.url
    page.keyboard.press("k")
    expect(page.locator("#step-50")).to_have_class(re.compile(r"\bfocused\b"))


def test_question_mark_lists_every_shortcut(page, tmp_path):
    trial = long_trajectory(tmp_path, 3)
    page.goto(reverse("trial-detail", args=[trial.pk]))
    help_box = page.locator("#key-help")
    expect(help_box).to_be_hidden()
    page.keyboard.press("?")
    expect(help_box).to_be_visible()
    for key in ("←", "→", "j", "k", "[", "]", "⌥←", "/", "n", "N", "?"):
        expect(help_box.locator("kbd", has_text=key).first).to_be_visible()
    page.keyboard.press("j")  # keys wait while the list is open
    assert focused_step(page) == ""
    page.keyboard.press("Escape")
    expect(help_box).to_be_hidden()


def test_the_transcript_filters_hide_each_kind_of_record(page, tmp_path):
    trial = import_trial_dir(crafted_trial_dir(tmp_path))
    page.goto(reverse("trial-detail", args=[trial.pk]))
    kinds = {"runtime": "#steps .tx-runtime", "permissions": "#steps .permission", "context": "#steps .ctx-refs"}
    for hide, selector in kinds.items():
        expect(page.locator(selector).first).to_be_visible()
        page.uncheck(f'input[data-hide="{hide}"]')
        expect(page.locator(selector).first).to_be_hidden()
        assert hide in page.url
        page.check(f'input[data-hide="{hide}"]')
        expect(page.locator(selector).first).to_be_visible()
    page.uncheck('input[data-hide="messages"]')
    expect(page.locator("#steps .msg").first).to_be_hidden()


def test_a_timeline_segment_goes_to_its_step(page, tmp_path):
    trial = long_trajectory(tmp_path, 120)
    page.goto(reverse("trial-detail", args=[trial.pk]))
    in_window = page.locator('#timeline a.seg[data-number="31"]')
    in_window.click()
    expect(page.locator("#step-31")).to_have_class(re.compile(r"\bfocused\b"))
    expect(page.locator("#step-31")).to_be_in_viewport()
    later = page.locator("#timeline a.seg").nth(-3)
    number = later.get_attribute("data-number")
    later.click()
    expect(page.locator(f"#step-{number}")).to_have_class(re.compile(r"\bfocused\b"))
    assert f"/steps/{number}/" in page.url
    assert page.errors == []


def test_collapse_all_folds_every_long_block_and_a_click_opens_one(page, tmp_path):
    prompt = "\n".join(f"rule {n}: be careful" for n in range(60))  # a 60-line system prompt
    trial = import_trial_dir(crafted_trial_dir(tmp_path, message=prompt))
    page.goto(reverse("trial-detail", args=[trial.pk]))
    block = page.locator("article.step.src-user pre.text").first
    assert block.bounding_box()["height"] > 600
    page.click("#collapse-all")
    expect(block).to_have_class(re.compile(r"\bfolded\b"))
    assert block.bounding_box()["height"] < 100
    block.click()
    expect(block).not_to_have_class(re.compile(r"\bfolded\b"))
    page.click("#collapse-all")
    page.click("#expand-all")
    expect(page.locator("#steps pre.folded")).to_have_count(0)


def test_the_side_by_side_page_opens_at_the_first_divergence_and_walks_it_by_keyboard(page, tmp_path):
    """Two attempts of one task of 120 steps; the right one runs another command at step 100."""
    steps = [tool_step(n, "bash", {"cmd": f"echo {n}"}) for n in range(1, 121)]
    left = import_trial_dir(write_trial(tmp_path / "l", "task-a__LLLLLLL", steps=steps))
    steps[99] = tool_step(100, "bash", {"cmd": "rm -rf build"})
    right = import_trial_dir(write_trial(tmp_path / "r", "task-a__RRRRRRR", steps=steps))
    page.goto(reverse("trial-detail", args=[left.pk]))
    page.click("#compare-with summary")
    page.click(f'#compare-with a[href="{reverse("trial-side-by-side", args=[left.pk, right.pk])}"]')
    divergence = page.locator("#first-divergence")
    expect(divergence).to_be_in_viewport()
    expect(divergence).to_have_class(re.compile(r"\bcurrent\b"))
    expect(divergence).to_contain_text("changed")
    expect(divergence.locator("td.num a").first).to_have_attribute("href", f"/trials/{left.pk}/steps/100/#step-100")
    expect(page.locator("#pairs")).to_contain_text("Steps 1–96 identical")
    page.keyboard.press("k")  # the identical step above it
    expect(page.locator("tr.pair.current")).to_contain_text("echo 99")
    page.keyboard.press("n")  # back to the only difference
    expect(divergence).to_have_class(re.compile(r"\bcurrent\b"))
    folded = page.locator("tbody.run.folded")  # the 20 identical steps after it
    expect(folded).to_be_hidden()
    page.keyboard.press("o")
    expect(folded).to_be_visible()
    page.keyboard.press("j")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(rf"/trials/{left.pk}/steps/101/#step-101$"))
    assert page.errors == []
