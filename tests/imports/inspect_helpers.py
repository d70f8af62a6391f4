"""What the Inspect log that tests/inspect_logs.py writes is known to hold, and a trial's facts to compare."""

from __future__ import annotations

from trials.models import ToolCall, Trial

# sample -> (status, reward, steps in the main lane, tool calls, input tokens, output tokens, limit)
AGENTIC = {
    "add": ("passed", 1.0, 3, 1, 220, 30, ""),
    "wrong": ("failed", 0.0, 2, 0, 50, 5, ""),
    "loop": ("errored", 0.0, 4, 3, 90, 9, "message_limit"),  # cut off by its limit: errored-like
    "crash": ("errored", None, 2, 1, 40, 4, ""),
}


def trial_facts(trial: Trial) -> tuple:
    main = trial.trajectories.get(role="main")
    return (
        trial.status,
        trial.reward,
        main.step_count,
        ToolCall.objects.filter(step__trajectory=main).count(),
        trial.input_tokens,
        trial.output_tokens,
        trial.failure_category,
    )
