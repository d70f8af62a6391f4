"""Abuse benchmark: a gunicorn worker's peak memory while three oversized bodies arrive at once.

Usage: .venv/bin/python bench/abuse_bench.py [--megabytes 100] [--port 8779] [--quick]

A fresh database (DATABASE_URL, or a SQLite file in a temporary folder); one gunicorn worker
(gthread, 3 threads, so the three requests share it) on 127.0.0.1; a runner's token and a
trial it started. Then three POSTs of `--megabytes` MB each to /api/trials/<id>/events/ at
once, with a Content-Length, and three more sent chunked (no Content-Length). Each must be
refused (413, or 411 for a chunked body) before the server reads it; the worker's peak RSS
(VmHWM in /proc/<pid>/status) before and after says how much they cost. A small POST of events
after them must still be stored. Then (not with `--quick`) three POSTs at once of one event
each, just under LIVE_MAX_BODY_BYTES, which are read and stored: the most a worker of three
threads holds for this endpoint. `--quick` sends 20 MB bodies and exits 0 when every check holds.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CHUNK = b'{"events": [{"type": "tool.progress", "payload": {"output": "' + b"x" * (1024 * 1024 - 60)
MB = 1024 * 1024
MAX_GROWTH_MB = 50  # what the three refused bodies may add to the worker's peak RSS


def setup_django(database_url: str, data_dir: str) -> tuple[str, int]:
    """Migrate; a runner's token, and the events endpoint's body limit."""
    os.environ.update(DATABASE_URL=database_url, DATA_DIR=data_dir, DJANGO_SETTINGS_MODULE="benchviewer.settings")
    os.environ.pop("REDIS_URL", None)
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from rest_framework.authtoken.models import Token

    from core import roles

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("abuse-runner", password="pw-abuse-1")
    roles.add_to_group(user, roles.RUNNER)
    return Token.objects.create(user=user).key, settings.LIVE_MAX_BODY_BYTES


def serve(database_url: str, data_dir: str, port: int) -> subprocess.Popen:
    env = {**os.environ, "DATABASE_URL": database_url, "DATA_DIR": data_dir, "DEBUG": "0"}
    env.pop("REDIS_URL", None)
    command = [str(REPO / ".venv/bin/gunicorn"), "benchviewer.wsgi", "--workers", "1", "--threads", "3"]
    command += ["--bind", f"127.0.0.1:{port}", "--log-level", "warning"]
    process = subprocess.Popen(command, cwd=REPO, env=env)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit(f"gunicorn did not start on port {port}")


def worker_pid(master: int) -> int:
    for _ in range(100):
        children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
        if children:
            return int(children[0])
        time.sleep(0.1)
    raise SystemExit("gunicorn started no worker")


def peak_rss_mb(pid: int) -> float:
    """The process's high-water mark of resident memory (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise SystemExit(f"no VmHWM in /proc/{pid}/status")


def request(port: int, path: str, token: str, body: bytes) -> tuple[int, bytes]:
    """A small POST: (status, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Token {token}\r\n"
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        sock.sendall(head.encode() + body)
        return parse(read_all(sock))


def read_all(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def parse(raw: bytes) -> tuple[int, bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    return (int(head.split()[1]) if head else 0), body


def flood(port: int, path: str, token: str, megabytes: int, chunked: bool, answers: list) -> None:
    """POST `megabytes` MB; stop sending as soon as the server answers (it need not read the rest)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {megabytes * MB}"
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Token {token}\r\n"
    head += f"Content-Type: application/json\r\n{framing}\r\nConnection: close\r\n\r\n"
    sent = 0
    try:
        sock.sendall(head.encode())
        for _ in range(megabytes):
            if select.select([sock], [], [], 0)[0]:
                break  # answered already
            piece = f"{len(CHUNK):x}\r\n".encode() + CHUNK + b"\r\n" if chunked else CHUNK
            sock.sendall(piece)
            sent += len(CHUNK)
        else:
            if chunked:
                sock.sendall(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server closed the connection after its answer
    try:
        status, body = parse(read_all(sock))
    except ConnectionResetError:
        status, body = 0, b"(connection reset before an answer)"
    sock.close()
    answers.append({"chunked": chunked, "status": status, "sent_mb": round(sent / MB, 1), "body": body[:200]})


def post_at_limit(port: int, path: str, token: str, limit: int) -> list[int]:
    """Three POSTs at once, each one event as large as the limit lets through: their statuses."""
    room = limit - 200
    statuses: list[int] = []

    def send(n: int) -> None:
        event = {"type": "tool.progress", "eventId": f"evt_big_{n}", "sequence": 10 + n, "payload": {"output": ""}}
        body = json.dumps({"events": [event]}).replace('"output": ""', f'"output": "{"y" * room}"').encode()
        statuses.append(request(port, path, token, body)[0])

    threads = [threading.Thread(target=send, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return statuses


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--megabytes", type=int, default=100)
    parser.add_argument("--port", type=int, default=8779)
    parser.add_argument("--database-url", default="", help="a fresh database; default: SQLite in a temporary folder")
    parser.add_argument("--quick", action="store_true", help="20 MB bodies; exit 0 when every check holds")
    args = parser.parse_args()
    megabytes = 20 if args.quick else args.megabytes

    with tempfile.TemporaryDirectory(prefix="abuse-bench-") as data_dir:
        database_url = args.database_url or f"sqlite:///{data_dir}/db.sqlite3"
        token, limit = setup_django(database_url, data_dir)
        server = serve(database_url, data_dir, args.port)
        try:
            worker = worker_pid(server.pid)
            spine = {"benchmark": {"datasetId": "abuse", "taskId": "flood", "trialId": "abuse-1"}}
            status, body = request(args.port, "/api/commands/start_benchmark_trial/", token, json.dumps(spine).encode())
            if status != 201:
                raise SystemExit(f"start_benchmark_trial answered {status}: {body[:300]!r}")
            path = f"/api/trials/{json.loads(body)['trial_id']}/events/"
            before = peak_rss_mb(worker)
            answers: list[dict] = []
            for chunked in (False, True):
                threads = [
                    threading.Thread(target=flood, args=(args.port, path, token, megabytes, chunked, answers))
                    for _ in range(3)
                ]
                started = time.perf_counter()
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                elapsed = time.perf_counter() - started
                framing = "chunked" if chunked else "Content-Length"
                print(f"three {megabytes} MB POSTs at once ({framing}): answered in {elapsed:.2f} s")
            after = peak_rss_mb(worker)
            event = {"type": "tool.progress", "eventId": "evt_after", "sequence": 1, "payload": {"ok": True}}
            small, small_body = request(args.port, path, token, json.dumps({"events": [event]}).encode())
            long_address = request(args.port, f"{path}?x={'x' * 4040}", token, b"{}")
            at_limit: list[int] = []
            if not args.quick:
                at_limit = post_at_limit(args.port, path, token, limit)
                print(f"worker peak RSS after three bodies at the limit stored: {peak_rss_mb(worker):.0f} MB")
        finally:
            server.terminate()
            server.wait(timeout=30)

    for answer in answers:
        framing = "chunked" if answer["chunked"] else "sized  "
        print(f"  {framing}: {answer['status']} after {answer['sent_mb']} MB sent")
    print(f"worker peak RSS: {before:.0f} MB before, {after:.0f} MB after (+{after - before:.0f} MB)")
    print(f"a small POST after them: {small} {small_body[:120]!r}")
    address_ok = long_address[0] == 414 and b'{"detail": "the address is' in long_address[1]  # (a chunked answer)
    shown = "JSON" if address_ok else repr(long_address[1][:80])
    print(f"a 4,064-byte address through gunicorn: {long_address[0]} {shown}")
    if not address_ok:
        print("FAIL: the long address did not get the JSON 414")
    expected = {False: 413, True: 411}
    failures = [a for a in answers if a["status"] != expected[a["chunked"]]]
    if failures:
        print(f"FAIL: not refused as expected: {failures}")
    if after - before > MAX_GROWTH_MB:
        print(f"FAIL: the worker grew by more than {MAX_GROWTH_MB} MB")
    if small != 200 or any(status != 200 for status in at_limit):
        print(f"FAIL: a POST within the limit was not stored ({small}, {at_limit})")
    stored = small == 200 and all(status == 200 for status in at_limit)
    if failures or after - before > MAX_GROWTH_MB or not stored or not address_ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
