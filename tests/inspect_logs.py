"""Inspect AI logs written by inspect_ai itself (a dev dependency), with its `mockllm` model: no network.

The model is a script: what it answers depends on the sample's question and on how many tool
results it has seen, so each sample's transcript is known whatever order Inspect runs them in.
Every model output carries its token usage (mockllm would otherwise count tokens with tiktoken,
which downloads its tables).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai.agent import handoff, react
from inspect_ai.approval import ApprovalPolicy, auto_approver
from inspect_ai.dataset import Sample
from inspect_ai.model import ChatMessage, ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import includes
from inspect_ai.solver import generate, use_tools
from inspect_ai.tool import Tool, bash, tool

MODEL = "mockllm/model"


def _usage(prompt: int, completion: int) -> ModelUsage:
    return ModelUsage(input_tokens=prompt, output_tokens=completion, total_tokens=prompt + completion)


def call(function: str, arguments: dict[str, Any], prompt: int, completion: int) -> ModelOutput:
    output = ModelOutput.for_tool_call(MODEL, function, arguments)
    output.usage = _usage(prompt, completion)
    return output


def say(text: str, prompt: int, completion: int) -> ModelOutput:
    output = ModelOutput.from_content(MODEL, text)
    output.usage = _usage(prompt, completion)
    return output


# question -> what the model says after 0, 1, 2… tool results (the last one again after that)
SCRIPTS: dict[str, list[Callable[[], ModelOutput]]] = {
    "What is 1+2?": [lambda: call("bash", {"command": "echo $((1+2))"}, 100, 20), lambda: say("ANSWER: 3", 120, 10)],
    "What is 2+2?": [lambda: say("ANSWER: 5", 50, 5)],
    "Count forever.": [lambda: call("bash", {"command": "echo again"}, 30, 3)],
    "Divide by zero.": [lambda: call("divide", {"x": 1, "y": 0}, 40, 4)],
}


def scripted(input: list[ChatMessage], tools: Any, tool_choice: Any, config: Any) -> ModelOutput:
    question = next(m.text for m in input if m.role == "user")
    seen = sum(1 for m in input if m.role == "tool")
    script = SCRIPTS[question]
    return script[min(seen, len(script) - 1)]()  # (a new output each time: each tool call has its own id)


@tool
def divide() -> Tool:
    async def execute(x: int, y: int) -> str:
        """Divide two numbers.

        Args:
          x: the dividend
          y: the divisor
        """
        return str(x / y)  # y = 0: a plain exception, not a ToolError, so the sample errors

    return execute


def agentic_task() -> Task:
    """Four samples × 2 epochs: a tool call and a right answer, a wrong answer, a message limit, an error."""
    samples = [
        Sample(id="add", input="What is 1+2?", target="3"),
        Sample(id="wrong", input="What is 2+2?", target="4"),
        Sample(id="loop", input="Count forever.", target="never"),
        Sample(id="crash", input="Divide by zero.", target="inf"),
    ]
    return Task(
        name="arithmetic",
        dataset=samples,
        solver=[use_tools(bash(), divide()), generate()],
        scorer=includes(),
        epochs=2,
        message_limit=6,
        sandbox="local",
    )


def write_agentic_log(log_dir: Path, log_format: str = "eval") -> Path:
    """The agentic task's log, run by inspect_ai with sandbox calls and approvals recorded."""
    model = get_model(MODEL, custom_outputs=scripted)
    [log] = inspect_eval(
        agentic_task(),
        model=model,
        log_dir=str(log_dir),
        log_format=log_format,
        display="none",
        fail_on_error=False,
        max_samples=1,
        approval=[ApprovalPolicy(auto_approver(), "*")],
    )
    return Path(log.location)


def delegating(input: list[ChatMessage], tools: Any, tool_choice: Any, config: Any) -> ModelOutput:
    """A main agent that hands off to `helper`, which runs a command, then the main agent submits."""
    names = {t.name for t in tools}
    seen = sum(1 for m in input if m.role == "tool")
    if "transfer_to_helper" in names:  # the main agent
        if seen == 0:
            return call("transfer_to_helper", {}, 20, 4)
        return call("submit", {"answer": "42"}, 25, 5)
    if not any(m.role == "tool" and getattr(m, "function", "") == "bash" for m in input):  # the helper
        return call("bash", {"command": "echo 42"}, 11, 2)
    return call("submit", {"answer": "The helper found 42."}, 12, 3)


def write_subagent_log(log_dir: Path) -> Path:
    helper = react(name="helper", description="Runs commands", tools=[bash()])
    task = Task(
        name="delegation",
        dataset=[Sample(id="ask", input="Ask the helper for the answer.", target="42")],
        solver=react(tools=[handoff(helper)]),
        scorer=includes(),
        sandbox="local",
        message_limit=30,  # (a script gone wrong stops)
    )
    [log] = inspect_eval(
        task,
        model=get_model(MODEL, custom_outputs=delegating),
        log_dir=str(log_dir),
        display="none",
        fail_on_error=False,
    )
    return Path(log.location)
