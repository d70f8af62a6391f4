"""The content a demo trajectory is made of: the agent's system prompt and tool definitions,
the arguments of its tool calls, and the terminal output its observations are cut from."""

from __future__ import annotations

import random
from typing import Any

TOOL_DEFINITIONS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a shell command in the task container and return its output.",
            "parameters": {
                "type": "object",
                "properties": {
                    "command": {"type": "string"},
                    "timeout_sec": {"type": "integer"},
                },
                "required": ["command"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a text file from the task container.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "write_file",
            "description": "Create or overwrite a file. May require approval.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"],
            },
        },
    },
]

SYSTEM_PROMPT = (
    "You are an autonomous software engineer working in a Linux container. Use the tools "
    "bash, read_file and write_file to complete the task. Writes outside /app and /etc may "
    "need approval. When you are done, reply with a short summary and no tool calls."
)

XSS_SNIPPET = (
    '<div class="comment">Nice build!</div>\n'
    "<script>alert(1)</script>\n"
    "<img src=x onerror=alert(2)>\n"
    '<a href="javascript:alert(3)">details</a>\n'
)

WORDS = (
    "build ok warning deprecated cache miss hit retry connect timeout listening worker pool "
    "config loaded parsed index table row column commit branch merge upstream request "
    "response status handler module import error trace frame"
).split()
DIRS = ("/app/src", "/app/tests", "/etc/app", "/var/log/app", "/srv/data", "/app/lib")


def text_pool(rng: random.Random, min_bytes: int) -> str:
    """Realistic-looking terminal output to cut observations from (built once per file)."""
    lines: list[str] = []
    size = 0
    n = 0
    while size < min_bytes:
        n += 1
        kind = n % 4
        if kind == 0:
            line = f"{rng.choice(DIRS)}/{rng.choice(WORDS)}_{n % 97}.py:{rng.randint(1, 400)}: "
            line += " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9)))
        elif kind == 1:
            line = f"-rw-r--r-- 1 root root {rng.randint(80, 99999):>6} Nov  2 13:{n % 60:02d} "
            line += f"{rng.choice(WORDS)}-{n}.{rng.choice(('py', 'txt', 'json', 'log'))}"
        elif kind == 2:
            line = f"[{n:05d}] INFO {rng.choice(WORDS)}: " + " ".join(
                rng.choice(WORDS) for _ in range(rng.randint(4, 12))
            )
        else:
            line = f"    {rng.randint(1, 999):>4}\t" + " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 10)))
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines) + "\n"


def tool_arguments(fn: str, path: str, rng: random.Random, main_file: str) -> dict[str, Any]:
    if fn == "bash":
        cmd = rng.choice(
            (
                "ls -la /app && git -C /app status --short",
                f"grep -rn 'TODO\\|FIXME' {path.rsplit('/', 1)[0]} | head -50",
                "cd /app && python -m pytest -x -q 2>&1 | tail -40",
                "journalctl -u app --no-pager -n 60",
                f"sed -n '1,80p' {main_file}",
                "cat /etc/os-release && df -h /",
            )
        )
        return {"command": cmd, "timeout_sec": 120}
    if fn == "read_file":
        return {"path": path}
    body = f"# patched by agent\n# target: {path}\n" + "\n".join(
        f"line_{i} = {rng.randint(0, 9999)}" for i in range(rng.randint(3, 12))
    )
    return {"path": path, "content": body + "\n"}
