"""Test-data builders and helpers shared by the test modules (the one module they import them from).

Fixtures stay in conftest.py, factory_boy factories in factories.py and the hostile corpus in
hostile_corpus.py; a helper that more than one test module uses lives here, never in a test module.
"""

from __future__ import annotations

import contextlib
import hashlib
import html as htmllib
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import orjson
import redis
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client

from benchviewer.celery import app as celery_app
from core import roles
from tests.factories import ConfigurationFactory, DatasetFactory, JobFactory, TaskFactory, TrialFactory
from trials.demo import write_demo, write_trajectory
from trials.imports.service import run_import
from trials.models import Import, Trial
from trials.queue import create_import

# Paths --------------------------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[1]
# The product definition beside the clone (../shared); BENCHVIEWER_SHARED names another place.
SHARED = Path(os.environ.get("BENCHVIEWER_SHARED", REPO.parent / "shared"))
REFERENCE = SHARED / "reference"
ATIF_SCHEMA = SHARED / "spec" / "harbor-0.25" / "atif-trajectory.schema.json"
SHARED_NAMES = {"SHARED": SHARED, "REFERENCE": REFERENCE, "ATIF_SCHEMA": ATIF_SCHEMA}


# A Redis database of the tests' own per xdist process (15, 14, ...): two worker fixtures at once
# flushed each other's queue and took each other's messages.
XDIST_INDEX = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
# Seconds a test waits for a state before calling the build broken: no verdict rests on it, so it is
# long enough for a machine under any load (the suite holds beside two CPU-bound processes).
HANG_GUARD = 600.0
# (TEST_REDIS_TOP_DB: where a second run of the suite beside the first counts down from, e.g. 11)
TOP_DB = int(os.environ.get("TEST_REDIS_TOP_DB", "15"))
TEST_REDIS_URL = os.environ.get("TEST_REDIS_URL", f"redis://127.0.0.1:6379/{TOP_DB - XDIST_INDEX}")


def reads_shared(module: object, function: object) -> bool:
    """Whether a test reads ../shared: its module imported one of the paths above, or the test did."""
    if any(getattr(module, name, None) is path for name, path in SHARED_NAMES.items()):
        return True
    code = getattr(function, "__code__", None)
    return code is not None and not SHARED_NAMES.keys().isdisjoint((*code.co_names, *code.co_varnames))


# Importing and the database -----------------------------------------------------------------


def import_path(path: Path) -> Import:
    """Import a file or folder through the same service the Celery task calls."""
    imp = create_import(origin=Import.Origin.CLI, source_name=path.name, source_path=str(path))
    return run_import(str(imp.pk))


def import_trial_dir(path: Path) -> Trial:
    import_path(path)
    return Trial.objects.latest("pk")


def migrate_to(target: tuple[str, str] | None = None):
    """Migrate the test database to `target` (the latest when None); the models of that state.

    The graph is loaded anew each time, as `migrate` would load it.
    """
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    targets = [target] if target else executor.loader.graph.leaf_nodes()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def assert_every_stored_pack_is_named() -> None:
    """One copy on disk too: a pack whose files a racing import stored first is not left behind."""
    from trials.imports.blobs import PACKS_FOLDER
    from trials.models import Blob
    from trials.storage.backend import blob_storage

    folder = Path(blob_storage().location) / PACKS_FOLDER
    on_disk = {f"{PACKS_FOLDER}/{path.name}" for path in folder.iterdir()}
    assert on_disk == set(Blob.objects.exclude(pack="").values_list("pack", flat=True))


# Hand-written ATIF trajectories and Harbor trial folders ------------------------------------


def atif(steps: list[dict], version: str = "ATIF-v1.7") -> dict:
    return {
        "schema_version": version,
        "session_id": "sess-bad-input",
        "agent": {"name": "test-agent", "version": "1.0", "model_name": "test-model"},
        "steps": steps,
    }


def good_steps() -> list[dict]:
    return [
        {"step_id": 1, "source": "user", "message": "do the task"},
        {
            "step_id": 2,
            "source": "agent",
            "message": "running",
            "tool_calls": [{"tool_call_id": "c1", "function_name": "bash", "arguments": {"cmd": "ls"}}],
            "observation": {"results": [{"source_call_id": "c1", "content": "file.txt"}]},
        },
    ]


def tool_step(number: int, tool: str, arguments: Any, result: str = "ok") -> dict:
    """An ATIF agent step making one tool call, with its result."""
    call = f"c{number}"
    return {
        "step_id": number,
        "source": "agent",
        "message": f"step {number}",
        "tool_calls": [{"tool_call_id": call, "function_name": tool, "arguments": arguments}],
        "observation": {"results": [{"source_call_id": call, "content": result}]},
    }


def write_trial(root: Path, name: str = "task-a__AAAAAAA", steps: list[dict] | None = None, **parts) -> Path:
    trial = root / name
    (trial / "agent").mkdir(parents=True)
    (trial / "verifier").mkdir()
    result = {
        "id": hashlib.md5(str(root / name).encode()).hexdigest(),
        "task_name": name.split("__")[0],
        "trial_name": name,
        "trial_uri": f"file:///jobs/{name}",
        "task_id": {"path": f"tasks/{name}"},
        "source": "bad-input-dataset",
        "task_checksum": "abc123",
        "config": {},
        "agent_info": {"name": "test-agent", "version": "1.0", "model_info": {"name": "test-model"}},
        "verifier_result": {"rewards": {"reward": 1.0}},
    }
    (trial / "result.json").write_bytes(orjson.dumps(result))
    if steps is not None or parts.get("trajectory", True):
        (trial / "agent" / "trajectory.json").write_bytes(orjson.dumps(atif(steps or good_steps())))
    if parts.get("details", True):
        (trial / "verifier" / "reward-details.json").write_bytes(
            orjson.dumps({"criteria": [{"name": "works", "score": 1.0}]})
        )
    if parts.get("manifest", True):
        (trial / "artifacts").mkdir()
        (trial / "artifacts" / "manifest.json").write_bytes(orjson.dumps([]))
    return trial


def loose_run(folder):
    """A trajectory with a continuation and a subagent file beside it, and one more pack in the folder."""
    folder.mkdir(parents=True)
    main = atif(good_steps())
    main["final_metrics"] = {"total_prompt_tokens": 100, "total_completion_tokens": 10, "total_cost_usd": 0.1}
    main["continued_trajectory_ref"] = "trajectory.cont-1.json"
    main["steps"][1]["observation"]["results"].append(
        {"subagent_trajectory_ref": [{"trajectory_id": "helper-1", "trajectory_path": "trajectory.helper.json"}]}
    )
    (folder / "trajectory.json").write_bytes(orjson.dumps(main))
    continuation = atif(good_steps())
    continuation["final_metrics"] = {"total_prompt_tokens": 200, "total_completion_tokens": 20, "total_cost_usd": 0.2}
    (folder / "trajectory.cont-1.json").write_bytes(orjson.dumps(continuation))
    helper = atif([{"step_id": 1, "source": "agent", "message": "helping"}])
    helper["final_metrics"] = {"total_prompt_tokens": 5000, "total_cost_usd": 5.0}
    (folder / "trajectory.helper.json").write_bytes(orjson.dumps(helper))
    (folder / "events.jsonl").write_bytes(
        orjson.dumps({"type": "benchmark.trial.started", "eventId": "e1", "sessionId": "sess-bad-input"}) + b"\n"
    )
    return folder


# Generated demo packs, tweaked for the viewer tests (built on trials.demo) -------------------

XSS = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'


def demo_jobs(out: Path) -> Path:
    """A two-task demo (baseline + candidate job, one attempt each)."""
    write_demo(out, tasks=2, attempts=1, seed=0)
    return out


def candidate_trial_dir(out: Path) -> Path:
    """The candidate trial that has every feature: a permission denial followed by a side
    effect, compaction, copied context, an XSS-looking tool result, a masked secret in its
    context events, rewards with reward details, CTRF tests and artifacts."""
    job = demo_jobs(out) / "candidate-job"
    return next(p for p in sorted(job.iterdir()) if (p / "verifier" / "reward-details.json").is_file())


def crafted_trial_dir(
    out: Path,
    *,
    context_events: list[dict[str, Any]] | None = None,
    message: str | None = None,
    tool_result: str | None = None,
    artifact_name: str | None = None,
) -> Path:
    """The demo candidate trial copied under a new name, with the given parts replaced."""
    source = candidate_trial_dir(out / "demo")
    target = out / source.name
    shutil.copytree(source, target)
    if context_events is not None:
        (target / "agent" / "context-events.jsonl").write_bytes(
            b"".join(orjson.dumps(e) + b"\n" for e in context_events)
        )
    if message is not None or tool_result is not None:
        path = target / "agent" / "trajectory.json"
        data = orjson.loads(path.read_bytes())
        for step in data["steps"]:
            if message is not None and step["source"] == "user":
                step["message"] = message
                message = None
            results = (step.get("observation") or {}).get("results") or []
            if tool_result is not None and step.get("tool_calls") and results:
                results[0]["content"] = tool_result
                tool_result = None
        path.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))
    if artifact_name is not None:
        (target / "artifacts" / artifact_name).write_text("artifact bytes\n")
        manifest_path = target / "artifacts" / "manifest.json"
        manifest = orjson.loads(manifest_path.read_bytes())
        manifest.append(
            {"source": f"/app/{artifact_name}", "destination": artifact_name, "type": "file", "status": "ok"}
        )
        manifest_path.write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    return target


def long_trajectory(
    out: Path, steps: int, name: str | None = None, observation_bytes: int = 200, planted: dict[int, str] | None = None
) -> Trial:
    """A standalone ATIF file of `steps` steps, imported as its own trial.

    `planted`: text added to the message of the step at each (0-based) index, to search for.
    """
    session = name or f"long-{steps}"
    path = out / f"{session}.trajectory.json"
    write_trajectory(
        path, steps=steps, observation_bytes=observation_bytes, seed=0, session_id=session, model="openai/gpt-5.4"
    )
    if planted:
        data = orjson.loads(path.read_bytes())
        for index, text in planted.items():
            data["steps"][index]["message"] += f"\n{text}"
        path.write_bytes(orjson.dumps(data))
    import_path(path)
    return Trial.objects.get(trajectories__session_id=session)


# Users in roles, and failed trials to triage ------------------------------------------------

ROLES = ("viewer", "reviewer", "triager", "approver")
PASSWORD = "pw-triage-1"


def every_page(client, url: str) -> list[dict]:
    """Every result of a paginated API list, page after page (its `next` links)."""
    found: list[dict] = []
    while url:
        page = client.get(url).json()
        found += page["results"]
        url = page["next"]
    return found


def make_user(name: str, group: str | None = None):
    user = get_user_model().objects.create_user(name, password=PASSWORD)
    if group:
        roles.add_to_group(user, group)
    return user


def set_pass_reward_in_admin(dataset: Any, value: str) -> str:
    """A dataset's pass threshold set as a person sets it: its admin change form, saved; the page it answers."""
    admin = get_user_model().objects.filter(username="admin").first()
    admin = admin or get_user_model().objects.create_superuser("admin", password="pw-admin-1")
    browser = Client()
    browser.force_login(admin)
    form = {"name": dataset.name, "version": dataset.version, "ref": dataset.ref, "pass_reward": value, "_save": "1"}
    response = browser.post(f"/admin/trials/dataset/{dataset.pk}/change/", form, follow=True)
    assert response.status_code == 200
    return response.content.decode()


def status_by_rule(reward: float, threshold: float = 1.0) -> str:
    """Issue 41's rule, written from its text for the tests' known answers: a pass at the threshold (full
    marks unless a dataset sets one), a fractional reward below it partial, 0 failed."""
    return "passed" if reward >= threshold else ("partial" if reward > 0 else "failed")


def import_demo(tmp_path: Path, tasks: int = 3, attempts: int = 2) -> list[Trial]:
    """Import the demo's candidate job; returns its failed trials (errored ones first)."""
    for job in write_demo(tmp_path / "demo", tasks=tasks, attempts=attempts):
        if job.name == "candidate-job":
            import_path(job)
    failed = list(Trial.objects.failed().order_by("pk"))
    failed.sort(key=lambda t: not t.events.filter(type="benchmark.trial.failed").exists())
    return failed


# Comparison sides built from factories ------------------------------------------------------

ERRORED = "errored"  # a trial that errored (no reward)
MISSING = "missing"  # a trial that finished without a reward


def build_side(key, tasks, *, dataset=None, checksums=None, role="", trial_kwargs=None, conf_kwargs=None):
    """One configuration whose trials have the given rewards, task by task."""
    conf = ConfigurationFactory(key=key, role=role, **(conf_kwargs or {}))
    job = JobFactory(key=f"job-{key}")
    dataset = dataset or DatasetFactory()
    for name, rewards in tasks.items():
        task = TaskFactory(dataset=dataset, name=name, checksum=(checksums or {}).get(name, f"sha-{name}"))
        for reward in rewards:
            kwargs = {"configuration": conf, "job": job, "task": task, **(trial_kwargs or {})}
            if reward == ERRORED:
                TrialFactory(reward=None, status="errored", **kwargs)
            elif reward == MISSING:
                TrialFactory(reward=None, status="failed", **kwargs)
            else:
                TrialFactory(reward=reward, **kwargs)
    return conf


def tb1_rows(folder: Path) -> list[dict]:
    """The rows of a Terminal-Bench 1 run folder's `results.json`, or of each run of a submission folder."""
    runs = [folder / "results.json"] if (folder / "results.json").is_file() else sorted(folder.glob("*/results.json"))
    return [row for path in runs for row in orjson.loads(path.read_bytes())["results"]]


def link_of(html: str, element_id: str) -> str:
    """The href of the page's link `element_id`, unescaped."""
    match = re.search(rf'<a[^>]*href="([^"]+)"[^>]*id="{element_id}"', html) or re.search(
        rf'<a[^>]*id="{element_id}"[^>]*href="([^"]+)"', html
    )
    assert match, f"no link #{element_id}"
    return htmllib.unescape(match.group(1))


def text_of(html: str, element_id: str) -> str:
    """The text of the element `element_id` up to its first child element."""
    match = re.search(rf'id="{element_id}"[^>]*>([^<]*)<', html)
    assert match, f"no element #{element_id}"
    return htmllib.unescape(match.group(1)).strip()


def matrix_tasks(client, url: str) -> set[str]:
    """The tasks a comparison page's link (`?…#matrix`, relative to the page) lists in its per-task matrix."""
    assert url.startswith("?"), url  # the matrix on the comparison page itself
    listing = client.get(f"/comparisons/{url.split('#')[0]}").content.decode()
    table = re.search(r'<table class="matrix">(.*?)</table>', listing, re.S)
    assert table, "no per-task matrix"
    return {htmllib.unescape(t) for t in re.findall(r'<tr class="outcome-[^"]*">\s*<td>([^<\s]+)', table.group(1))}


def listed_trials(client, url: str) -> set[int]:
    """The trials a trial-list link lists (its first page)."""
    listing = client.get(url).content.decode()
    return {int(pk) for pk in re.findall(r'href="/trials/(\d+)/', listing)}


# Threads and worker processes ----------------------------------------------------------------


def run_concurrently(count: int, target) -> list:
    results: list = [None] * count
    errors: list = []
    barrier = threading.Barrier(count)

    def worker(i: int) -> None:
        try:
            barrier.wait()
            results[i] = target()
        except Exception as exc:  # surfaced below, with the thread's own error
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    return results


def database_url() -> str:
    """The URL of the test database this process uses, for the worker process."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@contextlib.contextmanager
def on_broker(**conf):
    """Point this process's Celery app at another broker for a while, dropping pools made for the old one.

    On exit the overrides are removed, not set back to values read at entry: Celery's config reads
    through to Django's settings, so a value a test's `settings` fixture had changed would stick.
    """
    celery_app.conf.update(**conf)
    celery_app._pool = None
    celery_app.amqp._producer_pool = None
    try:
        yield
    finally:
        for key in conf:
            celery_app.conf.changes.pop(key, None)
        celery_app._pool = None
        celery_app.amqp._producer_pool = None


def free_port() -> int:
    """A local TCP port nobody listens on (for a server to start on, or a connection to be refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_worker(isolated_storage: Path, flush: bool = True):
    """A separate `celery worker` process on the real Redis (the tests' own database) and this test's database."""
    server = redis.Redis.from_url(TEST_REDIS_URL)
    server.ping()  # a real server, or the test fails here
    if flush:
        server.flushdb()  # the tests' own database: no message from an earlier run is left
    queue = celery_app.conf.task_default_queue
    env = {
        **os.environ,
        "REDIS_URL": TEST_REDIS_URL,
        "DATABASE_URL": database_url(),
        "DATA_DIR": str(isolated_storage),
    }
    log = open(isolated_storage / "worker.log", "wb")  # noqa: SIM115 - closed at teardown
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "benchviewer", "worker", "--pool=solo", "-Q", queue,
         "--without-gossip", "--without-mingle", "--loglevel=INFO"],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        with on_broker(broker_url=TEST_REDIS_URL, task_always_eager=False):
            yield process
    finally:
        process.terminate()
        process.wait(timeout=20)
        log.close()
