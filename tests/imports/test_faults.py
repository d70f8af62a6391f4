"""Faults, on the real services: workers killed mid-import, Redis restarted, duplicate and
concurrent deliveries, and PostgreSQL refusing writes.

Each test runs its own redis-server on a free port (the shared one on 6379 is never touched)
and real `celery worker` processes on the PostgreSQL test database.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from io import StringIO
from pathlib import Path

import orjson
import pytest
import redis
from django.core.management import call_command
from django.db import connection, connections
from kombu.exceptions import OperationalError as BrokerUnavailable

from benchviewer.celery import app as celery_app
from comparisons.models import Comparison
from tests.builders import (
    HANG_GUARD,
    REPO,
    assert_every_stored_pack_is_named,
    build_side,
    database_url,
    free_port,
    on_broker,
    run_concurrently,
    write_trial,
)
from trials.demo import write_job
from trials.imports.service import run_import
from trials.ingest.formats.harbor import trial_dirs
from trials.models import Import, Pack, Step, Trial
from trials.queue import create_import
from trials.tasks import import_pack_task

if connection.vendor != "postgresql":
    pytest.skip(
        "fault tests need PostgreSQL: worker processes share the test database "
        "(run with DATABASE_URL=postgres://..., as `make test-postgres` does)",
        allow_module_level=True,
    )

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.services]

FINISHED = (Import.Status.DONE, Import.Status.FAILED)


# Services --------------------------------------------------------------------------------


class RedisServer:
    """A private redis-server without persistence: a restart loses every message, as in production
    without AOF."""

    def __init__(self, workdir: Path):
        self.port = free_port()
        self.workdir = workdir
        self.process: subprocess.Popen | None = None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = open(self.workdir / "redis.log", "ab")  # noqa: SIM115 - the server owns it until it stops
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.workdir)],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        log.close()
        client = redis.Redis.from_url(self.url)
        wait_until(lambda: self._pings(client), 10, "redis-server did not start")

    @staticmethod
    def _pings(client: redis.Redis) -> bool:
        try:
            return bool(client.ping())
        except redis.ConnectionError:
            return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()  # SIGTERM: with --save "" nothing is written, every message is gone
            self.process.wait(timeout=10)
        self.process = None


class Workers:
    """`celery worker` processes, each in its own process group so one SIGKILL takes all of it."""

    def __init__(self, workdir: Path, broker_url: str):
        self.workdir = workdir
        self.broker_url = broker_url
        self.processes: list[subprocess.Popen] = []

    def start(
        self, name: str, *, concurrency: int = 1, beat: bool = False, db_options: str = "", db_port: int | None = None
    ) -> subprocess.Popen:
        # prefork, not solo: the import runs in a child process, so a dead child is noticed by
        # the parent and its message put back (reject_on_worker_lost), as in production.
        command = [
            sys.executable, "-m", "celery", "-A", "benchviewer", "worker", "-n", f"{name}@%h",
            "--pool=prefork", f"--concurrency={concurrency}", "-Q", celery_app.conf.task_default_queue,
            "--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel=INFO",
        ]  # fmt: skip
        if beat:  # the periodic sweep for stranded imports, every second here
            command += ["-B", "--schedule", str(self.workdir / f"beat-{name}")]
        full_env = {
            **os.environ,
            "REDIS_URL": self.broker_url,
            "DATABASE_URL": through_port(database_url(), db_port) + db_options,
            "DATA_DIR": str(self.workdir),
            "IMPORT_RECOVERY_INTERVAL": "1",
            "IMPORT_QUEUED_GRACE": "2",
            "IMPORT_BATCH_BYTES": "1",  # each trial written alone: a worker is killed between trials
        }
        log = open(self.log_path(name), "ab")  # noqa: SIM115 - the worker owns it
        process = subprocess.Popen(
            command, cwd=REPO, env=full_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        process.name = name  # type: ignore[attr-defined]
        self.processes.append(process)
        return process

    def log_path(self, name: str) -> Path:
        return self.workdir / f"worker-{name}.log"

    def logs(self, tail: int = 3000) -> str:
        """The end of each worker's log (tail=0: all of it)."""
        return "\n".join(self.log_path(p.name).read_text(errors="replace")[-tail:] for p in self.processes)

    @staticmethod
    def kill(process: subprocess.Popen) -> None:
        """SIGKILL the whole worker: the main process, its pool children, its beat."""
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)

    def stop_all(self) -> None:
        # SIGKILL, not a warm shutdown: a test worker has nothing worth finishing, and this is fast.
        for process in self.processes:
            if process.poll() is None:
                self.kill(process)


def pool_children(process: subprocess.Popen) -> list[int]:
    """The pool processes of a prefork worker (Linux /proc)."""
    children = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
    return [int(pid) for pid in children]


@pytest.fixture
def broker(isolated_storage: Path) -> Iterator[RedisServer]:
    server = RedisServer(isolated_storage / "redis")
    server.start()
    try:
        with on_broker(broker_url=server.url, task_always_eager=False):  # this process sends to it too
            yield server
    finally:
        server.stop()


@pytest.fixture
def workers(broker: RedisServer, isolated_storage: Path) -> Iterator[Workers]:
    group = Workers(isolated_storage, broker.url)
    try:
        yield group
    finally:
        group.stop_all()
        # A killed worker's sessions end a moment after it: gone before the test database is dropped.
        wait_until(lambda: other_sessions() == 0, 10, lambda: f"{other_sessions()} sessions left on the test database")


def other_sessions() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


# Helpers ---------------------------------------------------------------------------------


def wait_until(condition: Callable[[], bool], timeout: float, message: str | Callable[[], str]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(message() if callable(message) else message)


def send_import(path: Path) -> Import:
    imp = create_import(origin=Import.Origin.CLI, source_name=path.name, source_path=str(path))
    import_pack_task.delay(str(imp.pk))
    return imp


def all_finished(imports: list[Import], timeout: float, workers: Workers) -> list[Import]:
    def finished() -> bool:
        return Import.objects.filter(pk__in=[i.pk for i in imports], status__in=FINISHED).count() == len(imports)

    wait_until(finished, timeout, lambda: f"imports not finished; worker logs:\n{workers.logs()}")
    for imp in imports:
        imp.refresh_from_db()
    return imports


def long_job(root: Path, tasks: int = 30) -> Path:
    """A Harbor job whose import takes a few seconds: long trajectories, big observations.

    (Progress is saved every half second: on a fast machine ten tasks were done before a
    test saw two, and the worker it then killed had finished.)"""
    return write_job(
        root, "job", role="baseline", configuration_id="c", agent="a", model="m",
        tasks=tasks, attempts=2, steps_per_trial=400, observation_bytes=2000, with_extras=False,
    )  # fmt: skip


def small_job(root: Path, trials: int) -> Path:
    job = root / "job"
    for i in range(trials):
        write_trial(job, f"task-{i}__{i:07d}")
    (job / "config.json").write_text('{"job_name": "job"}')
    return job


def steps_in(job: Path) -> int:
    return sum(len(orjson.loads((t / "agent" / "trajectory.json").read_bytes())["steps"]) for t in trial_dirs(job))


def assert_imported_exactly_once(*jobs: Path) -> None:
    """Every trial of the jobs is there once, with every step once; nothing else."""
    assert Trial.objects.count() == sum(len(trial_dirs(job)) for job in jobs)
    assert Step.objects.count() == sum(steps_in(job) for job in jobs)
    assert sum(Trial.objects.values_list("step_count", flat=True)) == Step.objects.count()
    assert Pack.objects.count() == len(jobs)
    assert set(Pack.objects.values_list("status", flat=True)) == {Pack.Status.IMPORTED}


def imported_counts(imp: Import) -> tuple[int, int]:
    """(trials written, trials found already there) by this import."""
    [outcome] = [o for o in imp.outcomes if o["outcome"] == "imported"]
    return outcome["trials"], outcome["already"]


# Workers killed --------------------------------------------------------------------------


def test_an_import_whose_pool_process_is_killed_is_finished_by_a_new_one(workers, isolated_storage):
    job = long_job(isolated_storage / "src")
    worker = workers.start("a")  # no beat: acks_late + reject_on_worker_lost alone bring it back
    imp = send_import(job)
    wait_until(lambda: Import.objects.get(pk=imp.pk).progress_done >= 2, 60, workers.logs)

    [child] = pool_children(worker)
    os.kill(child, signal.SIGKILL)
    before = set(Trial.objects.values_list("pk", flat=True))

    [imp] = all_finished([imp], 60, workers)
    assert imp.status == Import.Status.DONE, imp.problems
    assert len(before) >= 2 and before <= set(Trial.objects.values_list("pk", flat=True))  # it went on from there
    assert imported_counts(imp) == (len(trial_dirs(job)), 0)  # and counts what it wrote before the kill as its own
    assert_imported_exactly_once(job)
    assert worker.poll() is None
    assert "WorkerLostError" in workers.logs(tail=0)


def test_an_import_whose_whole_worker_is_killed_is_finished_by_the_next_worker(workers, isolated_storage):
    job = long_job(isolated_storage / "src")
    first = workers.start("a")
    imp = send_import(job)
    wait_until(lambda: Import.objects.get(pk=imp.pk).progress_done >= 2, 60, workers.logs)

    workers.kill(first)  # its message stays unacknowledged in Redis for the visibility timeout (1 h)
    assert Import.objects.get(pk=imp.pk).status == Import.Status.RUNNING
    before = set(Trial.objects.values_list("pk", flat=True))

    def operator_sees_it_stranded() -> bool:
        # PostgreSQL drops the dead worker's lock once it notices the closed connection: a moment.
        out = StringIO()
        call_command("requeue_imports", "--dry-run", stdout=out)
        return f"would send again  {imp.pk}  (running, but no worker holds it)" in out.getvalue()

    wait_until(operator_sees_it_stranded, 10, "requeue_imports --dry-run does not list the stranded import")

    workers.start("b", beat=True)  # the sweep sees the import running with no worker holding it
    [imp] = all_finished([imp], 60, workers)
    assert imp.status == Import.Status.DONE, imp.problems
    assert len(before) >= 2 and before <= set(Trial.objects.values_list("pk", flat=True))
    assert imported_counts(imp) == (len(trial_dirs(job)), 0)
    assert_imported_exactly_once(job)
    assert "running, but no worker holds it" in workers.logs(tail=0)


# Redis restarted -------------------------------------------------------------------------


def test_imports_queued_before_during_and_after_a_redis_restart_are_all_done(workers, broker, isolated_storage):
    busy = long_job(isolated_storage / "busy")
    before = [small_job(isolated_storage / f"before-{i}", trials=2) for i in range(3)]
    workers.start("a", beat=True)
    running = send_import(busy)
    queued = [send_import(job) for job in before]  # waiting behind the busy one, in Redis only
    wait_until(lambda: Import.objects.get(pk=running.pk).progress_done >= 1, 60, workers.logs)

    broker.stop()  # the queued messages are gone with it
    during_job = small_job(isolated_storage / "during", trials=2)
    during = create_import(origin=Import.Origin.CLI, source_name="during", source_path=str(during_job))
    with pytest.raises(BrokerUnavailable):  # the API would answer 500 here, the import row exists
        import_pack_task.apply_async([str(during.pk)], retry_policy={"max_retries": 1})
    broker.start()  # same port, empty

    after = [small_job(isolated_storage / f"after-{i}", trials=2) for i in range(2)]
    later = [send_import(job) for job in after]

    imports = all_finished([running, *queued, during, *later], 75, workers)
    assert [imp.status for imp in imports] == [Import.Status.DONE] * len(imports), [i.problems for i in imports]
    assert_imported_exactly_once(busy, *before, during_job, *after)
    assert "no message for it is waiting in the broker" in workers.logs(tail=0)


# Duplicate and concurrent deliveries -----------------------------------------------------


def test_eight_concurrent_imports_of_one_pack_keep_one_copy(workers, isolated_storage):
    job = small_job(isolated_storage / "src", trials=6)
    imports = [create_import(origin=Import.Origin.CLI, source_name="job", source_path=str(job)) for _ in range(8)]
    workers.start("a", concurrency=4)
    workers.start("b", concurrency=4)
    for imp in imports:
        import_pack_task.delay(str(imp.pk))

    imports = all_finished(imports, 60, workers)
    assert {imp.status for imp in imports} == {Import.Status.DONE}
    assert_imported_exactly_once(job)
    assert_every_stored_pack_is_named()
    # Each trial was written by exactly one of the eight; the others found it there.
    written = sum(o["trials"] for imp in imports for o in imp.outcomes if o["outcome"] == "imported")
    assert written == len(trial_dirs(job))


def test_one_import_delivered_twice_at_once_runs_once(workers, isolated_storage):
    job = small_job(isolated_storage / "src", trials=4)
    imp = create_import(origin=Import.Origin.CLI, source_name="job", source_path=str(job))
    workers.start("a", concurrency=2)
    import_pack_task.delay(str(imp.pk))
    import_pack_task.delay(str(imp.pk))

    [imp] = all_finished([imp], 60, workers)
    assert imp.status == Import.Status.DONE
    assert imported_counts(imp) == (4, 0)  # one run wrote everything; the other one did not start
    assert len(imp.outcomes) == 1
    assert_imported_exactly_once(job)


def test_one_import_run_twice_at_once_without_the_worker_lock_keeps_one_copy(isolated_storage):
    # The lock is an economy, not what keeps the data right: the keys are. Bypass it.
    job = small_job(isolated_storage / "src", trials=4)
    imp = create_import(origin=Import.Origin.CLI, source_name="job", source_path=str(job))
    results = run_concurrently(2, lambda: run_import(str(imp.pk)))
    assert {r.status for r in results} == {Import.Status.DONE}
    assert_imported_exactly_once(job)


# The database refusing writes ------------------------------------------------------------


class TableLock:
    """Holds an ACCESS EXCLUSIVE lock on a table from a connection of its own, as a long
    migration or a stuck transaction would."""

    def __init__(self, table: str):
        self.table = table
        self.conn = connections.create_connection("default")

    def __enter__(self) -> TableLock:
        self.conn.set_autocommit(False)
        with self.conn.cursor() as cursor:
            cursor.execute(f"LOCK TABLE {self.table} IN ACCESS EXCLUSIVE MODE")
        return self

    def __exit__(self, *exc) -> None:
        self.conn.rollback()
        self.conn.close()


# The worker gives up waiting for a lock after one second: a real DatabaseError, quickly.
LOCK_TIMEOUT_1S = "?options=-c%20lock_timeout%3D1000"


def test_trials_the_database_refuses_are_reported_with_the_reason_and_imported_next_time(workers, isolated_storage):
    job = small_job(isolated_storage / "src", trials=2)
    workers.start("a", db_options=LOCK_TIMEOUT_1S)
    with TableLock("trials_step"):
        [imp] = all_finished([send_import(job)], 60, workers)

    assert imp.status == Import.Status.DONE
    [outcome] = imp.outcomes
    assert outcome["outcome"] == "rejected" and outcome["rejected"] == 2 and outcome["trials"] == 0  # none got in
    refused = [p for p in imp.problems if "database rejected the trial" in p["message"]]
    assert sorted(p["file"] for p in refused) == sorted(t.name for t in trial_dirs(job))  # which trial
    assert all("lock timeout" in p["message"] for p in refused)  # and why
    assert Trial.objects.count() == 0 and Step.objects.count() == 0  # rolled back whole
    assert Pack.objects.get().status == Pack.Status.IMPORTING  # left open, so a new import retries

    [again] = all_finished([send_import(job)], 60, workers)
    assert again.status == Import.Status.DONE
    assert imported_counts(again) == (2, 0)
    assert_imported_exactly_once(job)


def test_an_import_the_database_refuses_fails_with_the_reason(workers, isolated_storage):
    job = small_job(isolated_storage / "src", trials=2)
    workers.start("a", db_options=LOCK_TIMEOUT_1S)
    with TableLock("trials_pack"):
        [imp] = all_finished([send_import(job)], 60, workers)

    assert imp.status == Import.Status.FAILED
    [problem] = imp.problems
    assert problem["message"].startswith("import failed: OperationalError")
    assert "lock timeout" in problem["message"]
    assert Trial.objects.count() == 0


# Comparisons -----------------------------------------------------------------------------


def comparison_sides():
    base = build_side("base", {f"task-{i}": [0.0, 1.0] for i in range(4)}, role="baseline")
    cand = build_side("cand", {f"task-{i}": [1.0, 1.0] for i in range(4)}, role="candidate")
    return (
        f"/api/comparisons/?baseline={base.pk}&candidate={cand.pk}",
        f"/comparisons/?baseline={base.pk}&candidate={cand.pk}",
    )


def test_a_comparison_whose_message_was_lost_is_computed_by_the_recovery_sweep(workers, broker, client_logged_in):
    api_url, _ = comparison_sides()
    assert client_logged_in.get(api_url).status_code == 202  # sent, and waiting: no worker runs yet
    comparison = Comparison.objects.get()
    assert comparison.status == Comparison.Status.QUEUED
    broker.stop()  # Redis restarts without persistence: the message and its marker are gone
    broker.start()
    workers.start("a", beat=True)  # its sweep finds the comparison queued with no message

    def done() -> bool:
        return Comparison.objects.filter(pk=comparison.pk, status=Comparison.Status.DONE).exists()

    wait_until(done, 60, lambda: f"the comparison was never computed; worker logs:\n{workers.logs()}")
    assert "no worker will finish it; sending it again" in workers.logs(tail=0)
    answer = client_logged_in.get(api_url)
    assert answer.status_code == 200 and answer.json()["id"] == comparison.pk
    assert Comparison.objects.count() == 1


def test_while_the_broker_is_down_a_comparison_answers_503_and_is_computed_once_it_is_back(
    workers, broker, client_logged_in
):
    api_url, page_url = comparison_sides()
    broker.stop()
    for _ in range(2):  # and again: a queued row does not pass for one on its way
        answer = client_logged_in.get(api_url)
        assert answer.status_code == 503 and 1 <= int(answer["Retry-After"]) <= 60  # the outage's length so far
        assert "broker is unreachable" in answer.json()["detail"]
    page = client_logged_in.get(page_url)
    assert page.status_code == 503 and b'id="broker-unreachable"' in page.content
    assert Comparison.objects.get().status == Comparison.Status.QUEUED  # kept, for the sweep

    broker.start()
    workers.start("a", beat=True)

    def computed() -> bool:
        return client_logged_in.get(api_url).status_code == 200

    wait_until(computed, 60, lambda: f"the comparison was never computed; worker logs:\n{workers.logs()}")
    assert Comparison.objects.count() == 1


# The import command and a database that goes away -------------------------------------------


class DatabaseLink:
    """A TCP relay between a process and PostgreSQL: `cut` drops its connections and refuses new
    ones, as a database restart does to its clients; `mend` lets them through again."""

    def __init__(self, target_port: int):
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.up = threading.Event()
        self.up.set()
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if not self.up.is_set():
                client.close()  # refused while cut
                continue
            server = socket.create_connection(("127.0.0.1", self.target_port))
            self.sockets += [client, server]
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self.pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for end in (source, sink):  # shut down, not only closed: the other pump may be waiting in recv
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            end.close()

    def cut(self) -> None:
        self.up.clear()
        for end in self.sockets:
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.sockets.clear()

    def mend(self) -> None:
        self.up.set()

    def close(self) -> None:
        self.cut()
        self.listener.close()


def through_port(url: str, port: int | None) -> str:
    """The test database's URL, reaching it on another port (a DatabaseLink's) when one is given."""
    return url if port is None else url.replace(f":{connection.settings_dict['PORT'] or 5432}/", f":{port}/")


def import_command(paths: list[Path], link: DatabaseLink, broker: RedisServer, workdir: Path, wait: int):
    """`manage.py import_packs` in a process of its own, reaching the database through `link`."""
    url = through_port(database_url(), link.port)
    env = {**os.environ, "REDIS_URL": broker.url, "DATABASE_URL": url, "DATA_DIR": str(workdir),
           "IMPORT_COMMAND_DATABASE_WAIT": str(wait)}  # fmt: skip
    command = [sys.executable, "manage.py", "import_packs", *map(str, paths), "--no-progress"]
    return subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def running_import(source: Path) -> bool:
    return Import.objects.filter(source_path=str(source), progress_done__gte=1).exists()


def test_the_import_command_waits_through_a_database_restart_and_reports_every_path(workers, broker, isolated_storage):
    busy, small = long_job(isolated_storage / "busy"), small_job(isolated_storage / "small", trials=2)
    workers.start("a")
    link = DatabaseLink(int(connection.settings_dict["PORT"] or 5432))
    try:
        command = import_command([busy, small], link, broker, isolated_storage, wait=60)
        wait_until(lambda: running_import(busy), 60, workers.logs)
        link.cut()  # the command's connection is dropped and no new one is let in: a restart
        time.sleep(3)
        link.mend()
        out, err = command.communicate(timeout=HANG_GUARD)
    finally:
        link.close()
    assert command.returncode == 0, err
    assert "the database is unreachable" in err
    assert [line.split()[0] for line in out.splitlines() if "harbor-job" in line] == ["imported", "imported"], out
    assert set(Import.objects.values_list("status", flat=True)) == {Import.Status.DONE}
    assert_imported_exactly_once(busy, small)


def test_the_import_command_gives_up_after_its_bound_naming_what_the_workers_still_have(
    workers, broker, isolated_storage
):
    busy, small = long_job(isolated_storage / "busy"), small_job(isolated_storage / "small", trials=2)
    workers.start("a")
    link = DatabaseLink(int(connection.settings_dict["PORT"] or 5432))
    try:
        command = import_command([busy, small], link, broker, isolated_storage, wait=2)
        wait_until(lambda: running_import(busy), 60, workers.logs)
        link.cut()  # and never mended
        out, err = command.communicate(timeout=HANG_GUARD)
    finally:
        link.close()
    assert command.returncode != 0
    assert "the database stayed unreachable for 2 s" in err
    assert f"queued, a worker imports it: {busy}" in err and f"queued, a worker imports it: {small}" in err
    all_finished(list(Import.objects.all()), 120, workers)  # and the workers do
    assert_imported_exactly_once(busy, small)


def test_a_database_restart_mid_import_pauses_it_rejects_no_trial_and_runs_it_once(workers, isolated_storage):
    job = long_job(isolated_storage / "busy")
    link = DatabaseLink(int(connection.settings_dict["PORT"] or 5432))
    try:
        workers.start("a", beat=True, db_port=link.port)  # beat's sweep would re-send an import it thinks stranded
        imp = send_import(job)
        wait_until(lambda: running_import(job), 60, workers.logs)
        link.cut()  # every connection of the worker drops, its lock's too, and no new one gets in: a restart
        wait_until(lambda: "paused: the database is unreachable" in workers.logs(tail=0), 60, workers.logs)
        link.mend()
        [imp] = all_finished([imp], 180, workers)
    finally:
        link.close()
    assert imp.status == Import.Status.DONE, imp.problems
    assert not [p for p in imp.problems if "rejected" in p["message"] or "internal error" in p["message"]]
    assert [o["outcome"] for o in imp.outcomes] == ["imported"]
    assert_imported_exactly_once(job)
    log = workers.logs(tail=0)
    runs = log.count("the database is back; running it again") + log.count("another worker took it over")
    assert runs >= 1, log  # the first run waited for the database rather than failing
