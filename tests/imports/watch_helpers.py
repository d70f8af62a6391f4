"""`import_packs --watch` run in a subprocess, and a Harbor trial marked finished: shared by the watch tests."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson

from tests.builders import HANG_GUARD, REPO


class Watcher:
    """`manage.py import_packs --watch` in a subprocess, its output lines read as they come."""

    def __init__(self, env: dict[str, str], folder: Path):
        command = [sys.executable, "manage.py", "import_packs", "--watch", str(folder), "--no-progress"]
        self.process = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def wait_for(self, *words: str, timeout: float = HANG_GUARD) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                continue
            if all(word in line for word in words):
                return line
        raise AssertionError(f"no line with {words} in {timeout} s")

    def stop(self) -> int:
        self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout=20)


def finish(trial: Path, finished_at: str | None = "2026-11-26T01:00:00Z") -> None:
    result = orjson.loads((trial / "result.json").read_bytes())
    (trial / "result.json").write_bytes(orjson.dumps(result | {"finished_at": finished_at}))
