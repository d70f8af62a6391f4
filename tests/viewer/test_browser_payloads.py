"""A payload corpus in every field a page renders, opened in real Chromium: nothing runs,
and no payload becomes an element (the CSP would stop a script; escaping must stop the markup)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import orjson
import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tests.builders import candidate_trial_dir, import_path
from trials.models import Import, Job, QCItem, QCScenario, Trial

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # Playwright's sync API runs an event loop here
pytestmark = pytest.mark.browser


# Each payload marks itself: if it ever becomes an element, [data-xss] finds it.
PAYLOADS = [
    '<script data-xss>window.__xss="script"</script>',
    "<img data-xss src=x onerror=\"window.__xss='img'\">",
    "<svg data-xss onload=\"window.__xss='svg'\"><circle r=1 /></svg>",
    "<a data-xss href=\"javascript:window.__xss='href'\">click</a>",
    "[click](javascript:window.__xss='md')",
    '"><iframe data-xss src="javascript:window.__xss=\'iframe\'"></iframe>',
    "</textarea></pre></script><b data-xss onmouseover=\"window.__xss='b'\">x</b>",
]
ALL = " ".join(PAYLOADS)


def poisoned_trial(out: Path) -> Path:
    """The demo's richest trial with a payload in every string a page shows."""
    source = candidate_trial_dir(out / "demo")
    trial = out / "poisoned__XSS0001"
    shutil.copytree(source, trial)

    def rewrite(relative: str, change) -> None:
        path = trial / relative
        data = orjson.loads(path.read_bytes())
        change(data)
        path.write_bytes(orjson.dumps(data))

    def result(data):
        data["task_name"] = f"task {PAYLOADS[0]}"
        data["trial_name"] = f"trial {PAYLOADS[1]}"
        data["source"] = f"dataset {PAYLOADS[2]}"
        data["agent_info"]["name"] = f"agent {PAYLOADS[3]}"
        data["agent_info"]["model_info"]["name"] = f"model {PAYLOADS[4]}"
        data["verifier_result"] = {"rewards": {f"key {PAYLOADS[5]}": 0.5, "reward": 0.0}}
        data["exception_info"] = {"exception_type": f"Err{PAYLOADS[6]}", "exception_message": ALL,
                                  "exception_traceback": ALL, "occurred_at": "2026-01-01T00:00:00Z"}  # fmt: skip

    def trajectory(data):
        for step in data["steps"]:
            step["message"] = ALL
            if step["source"] == "agent":
                step["reasoning_content"] = ALL
            for call in step.get("tool_calls") or []:
                call["function_name"] = f"fn{PAYLOADS[1]}"
                call["arguments"] = {"cmd": ALL, PAYLOADS[0]: 1}
            for res in (step.get("observation") or {}).get("results") or []:
                res["content"] = ALL

    def details(data):
        for criterion in data["criteria"]:
            criterion["name"] = f"crit {PAYLOADS[2]}"
            criterion["reasoning"] = ALL
            criterion["evidence"] = [ALL]

    def manifest(data):
        for entry in data:
            entry["destination"] = f"out/{PAYLOADS[1]}.txt"
            entry["source"] = ALL

    rewrite("result.json", result)
    rewrite("agent/trajectory.json", trajectory)
    rewrite("verifier/reward-details.json", details)
    rewrite("artifacts/manifest.json", manifest)
    (trial / "trial.log").write_text(ALL)
    (trial / "verifier" / "test-stdout.txt").write_text(ALL)
    for name in ("runtime-events.jsonl", "context-events.jsonl"):
        path = trial / "agent" / name
        lines = []
        for line in path.read_bytes().splitlines():
            event = orjson.loads(line)
            payload = event.get("payload") or event.get("data") or {}
            for key in ("prompt", "toolName", "reason", "decidedBy"):
                if key in payload:
                    payload[key] = ALL
            for record in payload.values():
                if isinstance(record, dict):
                    for key in ("title", "rationale", "question", "safe_summary", "reason"):
                        if key in record:
                            record[key] = ALL
            lines.append(orjson.dumps(event))
        path.write_bytes(b"\n".join(lines) + b"\n")
    return trial


@pytest.fixture
def poisoned(tmp_path, transactional_db):
    import_path(poisoned_trial(tmp_path))
    return Trial.objects.get(name__startswith="trial ")


def page_urls(trial: Trial) -> list[str]:
    from trials.reading.tab_panels import TABS

    imp = Import.objects.first()
    urls = ["/", "/trials/", f"/trials/?task={trial.task.name}", "/jobs/", "/imports/", f"/imports/{imp.pk}/"]
    urls += [f"/trials/{trial.pk}/?tab={tab}" for tab, _ in TABS]
    urls += [f"/trials/{trial.pk}/steps/2/", f"/trials/{trial.pk}/?q=window"]
    if Job.objects.exists():
        urls.append(f"/jobs/{Job.objects.first().pk}/")
    config = trial.configuration.pk
    urls += [f"/comparisons/?baseline={config}&candidate={config}", "/triage/", "/qc/", "/qc/blockers/",
             "/qc/waivers/", "/qc/scenarios/"]  # fmt: skip
    urls += [f"/qc/items/{item.pk}/" for item in QCItem.objects.all()]
    urls += [f"/qc/scenarios/{scenario.pk}/" for scenario in QCScenario.objects.all()]
    return urls


def test_no_payload_runs_or_becomes_markup_on_any_page(poisoned, live_server, browser):
    user = get_user_model().objects.create_superuser("admin", password="pw-admin-1")
    client = Client()
    client.force_login(user)
    # QC pages render what triagers type: file a P0 blocker and a failure mode full of payloads.
    evidence = [f"step:{poisoned.steps.order_by('index').first().step_id}"]
    for body in (
        {"kind": "release-blocker", "category": "runtime", "severity": "P0", "note": ALL},
        {"kind": "failure-mode", "category": "tool", "severity": "P1", "note": ALL, "new_scenario_id": "xss-scenario",
         "new_scenario_title": f"scenario {PAYLOADS[1]}", "new_failure_mode": f"mode {PAYLOADS[2]}"},
    ):  # fmt: skip
        response = client.post(
            f"/api/trials/{poisoned.pk}/feedback/", body | {"evidence_refs": evidence}, content_type="application/json"
        )
        assert response.status_code == 201, response.content
    context = browser.new_context(base_url=live_server.url)
    context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value,
                          "url": live_server.url}])  # fmt: skip
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    for url in page_urls(poisoned):
        response = page.goto(url)
        assert response.status == 200, url
        page.wait_for_load_state("networkidle")
        for button in page.locator("button[data-expand], .expand, [data-action='expand']").all()[:5]:
            button.click()
        assert page.evaluate("window.__xss") is None, url
        assert page.locator("[data-xss]").count() == 0, url
        assert "window.__xss" in page.content() or "trial" in page.content(), url  # the text is shown
    assert dialogs == []
    context.close()
