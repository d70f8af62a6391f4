"""Query helpers behind the trial page, the trial and job lists, and the viewer API.

The trial page must cost the same whatever the trajectory length, so nothing here ever
loads a whole trajectory: steps come in index windows (the unique (trajectory, index)
index serves them), long texts are cut in the database, and everything hanging off a
step (tool calls, observations, permissions, context records) is fetched for the window
only. Search runs in the database over each step's search text (`StepText`) and returns step numbers.

lists.py: the trial and job lists; steps.py: a window of steps, one step, search;
tabs.py: the trial page's header and tabs; text.py: escaping, masking and printing
untrusted text.
"""
