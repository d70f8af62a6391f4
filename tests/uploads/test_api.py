"""The REST API, the upload page and the CLI: three doors to the same import service."""

from __future__ import annotations

import base64
import shutil

import orjson
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from rest_framework.authtoken.models import Token

from tests.builders import REFERENCE, import_path, write_trial
from trials.models import Import, Trial

pytestmark = pytest.mark.django_db


def test_every_api_endpoint_and_page_needs_login(client):
    for url in ("/api/trials/", "/api/imports/", "/api/schema/"):
        response = client.get(url)
        # 401 with a scheme a client can answer, and not Basic's (a browser would pop a login dialog)
        assert response.status_code == 401 and response["WWW-Authenticate"] == "Token", url
    for url in ("/", "/imports/", "/trials/", "/jobs/"):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/"), url


def test_posting_a_file_returns_an_import_id_and_its_status(client_logged_in, django_capture_on_commit_callbacks):
    pack = (REFERENCE / "lime-agentruntime" / "benchmark-trial-pack.json").read_bytes()
    with django_capture_on_commit_callbacks(execute=True):
        response = client_logged_in.post("/api/imports/", {"file": SimpleUploadedFile("pack.json", pack)})
    assert response.status_code == 202
    import_id = response.json()["id"]
    status = client_logged_in.get(f"/api/imports/{import_id}/").json()
    assert status["status"] == "done"  # no REDIS_URL: the task ran in-process
    assert status["progress"] == 1.0
    assert status["outcomes"][0]["outcome"] == "imported"
    assert Trial.objects.get().name == "trial-tool-approval-candidate-1"


def test_posting_without_a_file_is_a_400_with_the_field_error(client_logged_in):
    response = client_logged_in.post("/api/imports/", {})
    assert response.status_code == 400
    assert "file" in response.json()


def test_posting_several_files_at_once_is_a_400_not_a_silent_drop(client_logged_in):
    files = [SimpleUploadedFile(name, b"{}") for name in ("a.json", "b.json")]
    response = client_logged_in.post("/api/imports/", {"file": files})
    assert response.status_code == 400
    assert "one file per request" in response.json()["file"][0]
    assert not Import.objects.exists()


def test_bad_upload_reports_every_error_in_the_import_status(client_logged_in, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = client_logged_in.post("/api/imports/", {"file": SimpleUploadedFile("x.json", b'{"a": [1,}')})
    status = client_logged_in.get(response.json()["url"]).json()
    assert status["outcomes"][0]["outcome"] == "rejected"
    assert status["problems"][0]["file"] == "x.json" and status["problems"][0]["line"] == 1


def test_http_basic_and_token_auth_are_accepted(client, user):
    basic = base64.b64encode(b"reviewer:pw-reviewer-1").decode()
    assert client.get("/api/trials/", HTTP_AUTHORIZATION=f"Basic {basic}").status_code == 200
    token = Token.objects.create(user=user)
    assert client.get("/api/trials/", HTTP_AUTHORIZATION=f"Token {token.key}").status_code == 200


def test_trials_list_filters_by_job_dataset_configuration_role_task_and_status(client_logged_in, tmp_path):
    import_path(REFERENCE / "lime-agentqc" / "lime-benchmark-experiment.json")
    import_path(REFERENCE / "agentv" / "multi-agent.eval.results.jsonl")
    everything = client_logged_in.get("/api/trials/").json()
    assert everything["count"] == Trial.objects.count() == 7
    trial = Trial.objects.filter(source_format="agentqc").select_related("configuration", "task", "dataset").first()
    queries = {
        "job": trial.job_id,
        "dataset": trial.dataset_id,
        "configuration": trial.configuration.key,
        "role": trial.configuration.role,
        "task": trial.task.name,
        "status": trial.status,
    }
    for name, value in queries.items():
        results = client_logged_in.get("/api/trials/", {name: value}).json()["results"]
        assert trial.pk in [r["id"] for r in results], name
        expected = Trial.objects.filter(
            **{
                "job": {"job_id": value},
                "dataset": {"dataset_id": value},
                "configuration": {"configuration__key": value},
                "role": {"configuration__role": value},
                "task": {"task__name": value},
                "status": {"status": value},
            }[name]
        ).count()
        assert len(results) == expected, name


def test_the_task_filter_takes_the_task_id_as_well_as_its_name(client_logged_in):
    import_path(REFERENCE / "lime-agentqc" / "lime-benchmark-experiment.json")
    trial = Trial.objects.exclude(task=None).first()
    by_id = client_logged_in.get("/api/trials/", {"task": trial.task_id}).json()["results"]
    by_name = client_logged_in.get("/api/trials/", {"task": trial.task.name}).json()["results"]
    assert trial.pk in [r["id"] for r in by_id]
    assert {r["id"] for r in by_id} == set(Trial.objects.filter(task_id=trial.task_id).values_list("pk", flat=True))
    assert {r["id"] for r in by_id} <= {r["id"] for r in by_name}


def test_a_task_named_by_a_number_is_found_by_its_name_before_a_task_of_that_id(client_logged_in):
    from tests.factories import TrialFactory

    other = TrialFactory()
    named = TrialFactory(task__name=str(other.task_id))
    found = client_logged_in.get("/api/trials/", {"task": str(other.task_id)}).json()["results"]
    assert [r["id"] for r in found] == [named.pk]  # the task named "<n>", as the comparison's links mean it


HUGE = "99999999999999999999999"


@pytest.mark.parametrize(
    "url",
    [
        "/api/trials/?job=%C2%B2",
        f"/api/trials/?job={HUGE}",
        f"/api/trials/?dataset={HUGE}",
        "/api/trials/?configuration=%C2%B2",
        f"/api/trials/?task={HUGE}",
        "/trials/?job=%C2%B2",
        "/api/trials/{pk}/trajectory/?trajectory=%C2%B2",
        f"/api/trials/{{pk}}/search/?q=a&offset={HUGE}",
        f"/api/trials/{{pk}}/steps/?page={HUGE}",
        f"/trials/{{pk}}/?page={HUGE}",
        f"/trials/{{pk}}/?q=a&offset={HUGE}",
        "/trials/{pk}/?step=%C2%B2",
        "/api/qc/items/?trial=%C2%B2",
        f"/api/qc/items/?trial={HUGE}",
        "/api/comparisons/?baseline=%C2%B2&candidate=1",
        "/comparisons/?baseline=%C2%B2&candidate=1",
    ],
)
def test_a_number_no_column_can_hold_is_answered_not_a_server_error(client_logged_in, url):
    from tests.factories import TrialFactory

    trial = TrialFactory()
    response = client_logged_in.get(url.replace("{pk}", str(trial.pk)))
    assert response.status_code < 500, (url, response.status_code)


def test_a_nul_searched_for_matches_nothing(client_logged_in, tmp_path):
    import_path(write_trial(tmp_path))
    trial = Trial.objects.get()
    found = client_logged_in.get(f"/api/trials/{trial.pk}/search/", {"q": "\x00", "inside": "1"}).json()
    assert found["matches"] == []


@pytest.mark.parametrize(
    "params", [{"role": "nonsense"}, {"complete": "maybe"}, {"status": "nonsense"}, {"reward_min": "abc"}]
)
def test_a_filter_value_that_means_nothing_is_a_400_not_a_silently_ignored_filter(client_logged_in, params):
    response = client_logged_in.get("/api/trials/", params)
    assert response.status_code == 400 and list(response.json()) == list(params)


def test_the_completeness_filter_takes_true_and_false_among_trials_with_lime_evidence(client_logged_in, tmp_path):
    import_path(REFERENCE / "agentv" / "multi-agent.eval.results.jsonl")  # no Lime evidence: never "incomplete"
    import_path(REFERENCE / "lime-agentqc" / "lime-benchmark-experiment.json")  # Agent QC trials: Lime's checks
    lime = Trial.objects.filter(source_format="agentqc")
    incomplete = {r["id"] for r in client_logged_in.get("/api/trials/", {"complete": "false"}).json()["results"]}
    assert incomplete == set(lime.filter(is_complete=False).values_list("pk", flat=True)) != set()
    assert client_logged_in.get("/api/trials/", {"complete": "true"}).json()["count"] == (
        lime.filter(is_complete=True).count()
    )


def test_unknown_api_addresses_and_trajectories_are_json_404s(client_logged_in):
    import_path(REFERENCE / "agentv" / "multi-agent.eval.results.jsonl")
    trial = Trial.objects.first()
    for url in ("/api/trials/-1/", "/api/imports/not-a-uuid/", "/api/nothing-here/"):
        response = client_logged_in.get(url)
        assert response.status_code == 404 and response["Content-Type"] == "application/json", url
    assert Client().get("/api/nothing-here/").status_code == 401  # still no answer without login
    for t in ("abc", "999999"):
        assert client_logged_in.get(f"/api/trials/{trial.pk}/steps/", {"t": t}).status_code == 404


def test_trials_list_is_paginated(client_logged_in, settings):
    import_path(REFERENCE / "agentv" / "multi-agent.eval.results.jsonl")
    page = client_logged_in.get("/api/trials/", {"page_size": 2}).json()
    assert page["count"] == 5 and len(page["results"]) <= 50 and "next" in page


def test_trial_detail_carries_the_completeness_checks(client_logged_in, tmp_path):
    write_trial(tmp_path, manifest=False)
    import_path(tmp_path / "task-a__AAAAAAA")
    trial = Trial.objects.get()
    body = client_logged_in.get(f"/api/trials/{trial.pk}/").json()
    checks = {c["check"]: c for c in body["completeness"]["checks"]}
    assert body["completeness"]["joinable"] is False
    assert checks["artifactManifestRef"]["passed"] is False
    assert checks["artifactManifestRef"]["consequence"] == "viewable, but cannot be promoted"
    assert checks["trajectoryRef"]["passed"] is True
    assert checks["runtimeCorrelation"]["consequence"] == "runtime profile blocks"


def test_openapi_schema_lists_the_import_and_trial_endpoints(client_logged_in):
    response = client_logged_in.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    paths = orjson.loads(response.content)["paths"]
    assert {"/api/imports/", "/api/imports/{id}/", "/api/trials/", "/api/trials/{id}/"} <= set(paths)


def test_the_openapi_schema_lists_each_error_the_api_answers(tmp_path, client, client_logged_in):
    from tests.builders import make_user

    schema = orjson.loads(client_logged_in.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").content)
    import_path(write_trial(tmp_path))
    trial = Trial.objects.get()
    viewer = Client()
    viewer.force_login(make_user("vera", "viewer"))
    trajectory, feedback = f"/api/trials/{trial.pk}/trajectory/", f"/api/trials/{trial.pk}/feedback/"
    as_json, urlencoded = {"content_type": "application/json"}, "application/x-www-form-urlencoded"
    answers = [
        ("get", "/api/trials/", Client().get("/api/trials/")),  # not logged in
        ("get", "/api/trials/", client_logged_in.get("/api/trials/", {"status": "bogus"})),
        ("get", "/api/trials/{id}/", client_logged_in.get("/api/trials/999999/")),
        ("get", "/api/trials/{id}/trajectory/", client_logged_in.get(trajectory, {"trajectory": "x"})),
        ("post", "/api/imports/", viewer.post("/api/imports/", {"file": SimpleUploadedFile("a.json", b"{}")})),
        ("post", "/api/imports/", client_logged_in.post("/api/imports/", {})),
        ("post", "/api/trials/{id}/feedback/", client_logged_in.post(feedback, {"layer": 1}, **as_json)),
        ("post", "/api/trials/{id}/feedback/", viewer.post(feedback, {}, **as_json)),
        ("post", "/api/token/", Client().post("/api/token/", {"username": "reviewer", "password": "wrong"})),
        ("get", "/api/trials/", client_logged_in.get("/api/trials/", {"page": 999})),
        ("get", "/api/imports/", client_logged_in.get("/api/imports/", HTTP_ACCEPT="application/xml")),
        ("post", "/api/imports/", client_logged_in.post("/api/imports/", {}, **as_json)),
        ("post", "/api/imports/", client_logged_in.post("/api/imports/", "file=x", content_type=urlencoded)),
    ]  # fmt: skip
    assert answers[-1][2].status_code == 415  # (a urlencoded form cannot carry a file)
    body = schema["paths"]["/api/imports/"]["post"]["requestBody"]["content"]
    assert set(body) == {"multipart/form-data"}
    # The feedback body's required fields are the ones the form refuses a POST without
    triager = Client()
    triager.force_login(make_user("tom", "triager"))
    refused = triager.post(feedback, {}, **as_json).json()
    assert set(schema["components"]["schemas"]["FeedbackRequest"]["required"]) == set(refused)
    for method, path, response in answers:
        assert response.status_code >= 400, (method, path, response.status_code)
        documented = schema["paths"][path][method]["responses"]
        assert str(response.status_code) in documented, (method, path, response.status_code, sorted(documented))
        assert "detail" in response.json() or response.status_code == 400, (path, response.json())
    assert "401" not in schema["paths"]["/api/token/"]["post"]["responses"]  # it is how one logs in


def test_upload_page_accepts_several_files_at_once(client_logged_in, django_capture_on_commit_callbacks):
    files = [
        SimpleUploadedFile("a.jsonl", (REFERENCE / "agentv" / "camel-replay-index.jsonl").read_bytes()),
        SimpleUploadedFile("b.json", (REFERENCE / "lime-agentruntime" / "submit-turn-event.json").read_bytes()),
    ]
    with django_capture_on_commit_callbacks(execute=True):
        response = client_logged_in.post("/imports/", {"files": files})
    assert response.status_code == 302
    assert Import.objects.filter(origin="upload", status="done").count() == 2


def test_an_empty_file_among_several_uploads_is_named_in_the_error(client_logged_in):
    files = [SimpleUploadedFile("good.json", b"{}"), SimpleUploadedFile("empty.json", b"")]
    response = client_logged_in.post("/imports/", {"files": files})
    assert response.status_code == 200 and not Import.objects.exists()
    assert "empty.json: The submitted file is empty." in response.content.decode()


def test_the_import_page_gives_the_counts_of_packs_that_bring_events_documents_and_joins(
    client_logged_in, django_capture_on_commit_callbacks
):
    events = (REFERENCE / "lime-agentruntime" / "submit-turn-event.json").read_bytes()
    with django_capture_on_commit_callbacks(execute=True):
        response = client_logged_in.post("/imports/", {"files": [SimpleUploadedFile("events.json", events)]})
    imp = Import.objects.get()
    [outcome] = imp.outcomes
    assert outcome["details"] == "1 events"
    assert "<td>1 events</td>" in client_logged_in.get(response["Location"]).content.decode()


def test_import_page_escapes_a_hostile_file_name(client_logged_in):
    name = '<img src=x onerror="alert(1)">.json'
    client_logged_in.post("/imports/", {"files": [SimpleUploadedFile(name, b"{}")]})
    imp = Import.objects.get()
    html = client_logged_in.get(f"/imports/{imp.pk}/").content.decode()
    assert "<img src=x" not in html and "&lt;img src=x" in html


def test_cli_prints_one_line_per_pack_and_fails_when_one_is_rejected(tmp_path, capsys):
    (tmp_path / "bad.json").write_bytes(b"{nope")
    (tmp_path / "good.jsonl").write_bytes((REFERENCE / "agentv" / "camel-replay-index.jsonl").read_bytes())
    with pytest.raises(CommandError, match="1 pack"):
        call_command("import_packs", str(tmp_path), "--no-progress")
    out = capsys.readouterr()
    assert "rejected" in out.out and "bad.json" in out.out and "imported" in out.out
    assert "malformed JSON" in out.err
    call_command("import_packs", str(tmp_path / "good.jsonl"), "--no-progress")
    assert "already imported" in capsys.readouterr().out


def test_createsuperuser_noinput_reads_the_usual_environment(monkeypatch, django_user_model):
    monkeypatch.setenv("DJANGO_SUPERUSER_USERNAME", "admin")
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "pw-admin-1")
    monkeypatch.setenv("DJANGO_SUPERUSER_EMAIL", "admin@example.com")
    call_command("createsuperuser", "--noinput")
    assert django_user_model.objects.get(username="admin").check_password("pw-admin-1")


def test_import_page_links_to_the_trials_it_imported_and_to_those_it_found_already(
    client_logged_in, django_capture_on_commit_callbacks, tmp_path
):
    from trials.demo import write_job

    job = write_job(
        tmp_path / "job", "linked-job", role="baseline", configuration_id="c", agent="a", model="m", tasks=3, attempts=1
    )
    archive = shutil.make_archive(str(tmp_path / "job"), "zip", job)
    imports = []
    for _ in range(2):  # the second finds the pack already imported
        with open(archive, "rb") as f, django_capture_on_commit_callbacks(execute=True):
            response = client_logged_in.post("/imports/", {"files": SimpleUploadedFile("job.zip", f.read())})
        assert response.status_code == 302
        imports.append(Import.objects.get(pk=response["Location"].rstrip("/").rsplit("/", 1)[1]))
    first, second = imports
    assert [o["outcome"] for o in second.outcomes if o["kind"] != "archive"] == ["already imported"]
    answers = [client_logged_in.get(f"/api/imports/{i.pk}/").json() for i in imports]
    assert [(a["nothing_new"], a["has_trials"]) for a in answers] == [(False, True), (True, True)]
    listed = client_logged_in.get("/imports/").content.decode()
    assert listed.count('data-field="nothing-new">') == 1 and listed.count('data-field="nothing-new" hidden>') == 1
    page = client_logged_in.get(first.get_absolute_url()).content.decode()
    pack_id = next(o["pack_id"] for o in first.outcomes if o.get("pack_id"))
    assert f'href="/trials/?pack={pack_id}">3 trials</a> · ' in page  # then its other counts
    assert f'href="/trials/?import_id={first.pk}"' in page
    for imp in imports:
        listed = client_logged_in.get("/trials/", {"import_id": str(imp.pk)})
        assert listed.context["page"].paginator.count == 3
        assert f">{imp.source_name}</a>" in listed.content.decode()
    assert client_logged_in.get("/trials/", {"pack": pack_id}).context["page"].paginator.count == 3
    assert client_logged_in.get("/api/trials/", {"import_id": str(first.pk)}).json()["count"] == 3
    assert client_logged_in.get("/api/trials/", {"import_id": "not-a-uuid"}).status_code == 400
    assert client_logged_in.get("/api/trials/", {"pack": "99999999999999999999"}).status_code == 400
    messages = [str(m) for m in response.wsgi_request._messages]
    assert set(messages) == {"1 file(s) uploaded."}  # not "queued", which the page would go on saying once done


def test_a_user_gets_their_api_token_with_their_password_and_the_docs_page_asks_for_a_login(user, client):
    from django.test import Client

    user.set_password("pw-1")
    user.save()
    anonymous = Client()
    assert anonymous.post("/api/token/", {"username": user.username, "password": "wrong"}).status_code == 400
    token = anonymous.post("/api/token/", {"username": user.username, "password": "pw-1"}).json()["token"]
    assert token == Token.objects.get(user=user).key
    assert anonymous.get("/api/trials/", HTTP_AUTHORIZATION=f"Token {token}").status_code == 200
    docs = anonymous.get("/api/docs/")
    assert docs.status_code == 302 and docs["Location"].startswith("/accounts/login/")

    from tests.builders import PASSWORD, make_user

    viewer = make_user("vera", "viewer")  # read-only, and logged in: may still fetch her own token
    browser = Client(enforce_csrf_checks=False)
    browser.force_login(viewer)
    answer = browser.post("/api/token/", {"username": "vera", "password": PASSWORD})
    assert answer.status_code == 200 and answer.json()["token"] == Token.objects.get(user=viewer).key


def test_an_import_of_trials_another_pack_brought_first_links_to_them(
    client_logged_in, django_capture_on_commit_callbacks, tmp_path
):
    for name in ("task-a__AAAAAAA", "task-b__BBBBBBB"):
        write_trial(tmp_path / "job", name)
    (tmp_path / "job" / "config.json").write_text('{"job_name": "job"}')
    import_path(tmp_path / "job")  # the job brings both trials
    archive = shutil.make_archive(str(tmp_path / "one"), "zip", tmp_path / "job", "task-a__AAAAAAA")
    for attempt in ("trial by trial", "the whole pack"):  # the second upload finds the pack itself stored
        with open(archive, "rb") as f, django_capture_on_commit_callbacks(execute=True):
            response = client_logged_in.post("/imports/", {"files": SimpleUploadedFile("one.zip", f.read())})
        imp = Import.objects.get(pk=response["Location"].rstrip("/").rsplit("/", 1)[1])
        [outcome] = [o for o in imp.outcomes if o["kind"] != "archive"]
        assert outcome["outcome"] == "already imported", attempt
        listed = client_logged_in.get("/trials/", {"import_id": str(imp.pk)}).context["page"].object_list
        assert [t.name for t in listed] == ["task-a__AAAAAAA"], attempt
    assert outcome["trials"] == 1  # the pack's count says so too
    assert Trial.objects.count() == 2
