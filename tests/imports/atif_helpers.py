"""ATIF as producers other than Harbor write it, for the import and upload tests (issue 41)."""

from __future__ import annotations

import json
from pathlib import Path


def lenient_file(path: Path) -> dict:
    """A non-conformant "ATIF-v1.6": OpenAI-style messages, every tool call twice, no source_call_id,
    tokens only in final_metrics."""
    call = {"tool_call_id": "call_1", "function_name": "bash", "arguments": {"cmd": "ls"}}
    data = {
        "schema_version": "ATIF-v1.6",
        "session_id": "other-producer-1",
        "agent": {"name": "other-agent", "version": "0.3", "model_name": "gpt-5"},
        "steps": [
            {"step_id": 1, "source": "user", "message": [{"role": "user", "content": "list the files"}]},
            {
                "step_id": 2,
                "source": "agent",
                "message": {"role": "assistant", "content": "I will run ls"},
                "tool_calls": [call, dict(call)],
                "observation": {"results": [{"content": "a.txt\nb.txt"}]},
            },
        ],
        "final_metrics": {"total_prompt_tokens": 1234, "total_completion_tokens": 56},
    }
    path.write_text(json.dumps(data))
    return data
