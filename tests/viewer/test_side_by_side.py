"""Two trials of one task side by side: the alignment's known answers, the align API and the page."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.builders import import_trial_dir, migrate_to, tool_step, write_trial
from trials.ingest.signatures import step_signature
from trials.models import Step
from trials.reading.align import Signed, align, align_window

# Pure alignment on hand-built steps ------------------------------------------------------------


def signed(ref, *calls, result="ok", message=""):
    """A step as the aligner sees it: `calls` are (tool, arguments); none makes it a message."""
    sig = step_signature("agent", message, list(calls), [result] if calls else [])
    return Signed(ref, sig.align_key, sig.signature)


def baseline():
    return [
        signed("read", ("read_file", {"path": "a.py"})),
        signed("edit", ("write_file", {"path": "a.py", "content": "x = 1\n"})),
        signed("test", ("bash", {"cmd": "pytest -q"})),
        signed("done", message="All tests pass."),
    ]


def statuses(pairs):
    return [(p.left, p.right, p.status) for p in pairs]


def test_identical_trajectories_pair_every_step_as_same():
    assert statuses(align(baseline(), baseline())) == [
        ("read", "read", "same"),
        ("edit", "edit", "same"),
        ("test", "test", "same"),
        ("done", "done", "same"),
    ]


def test_an_inserted_step_stands_alone_on_the_right():
    right = baseline()
    right.insert(2, signed("ls", ("bash", {"cmd": "ls"})))
    assert statuses(align(baseline(), right)) == [
        ("read", "read", "same"),
        ("edit", "edit", "same"),
        (None, "ls", "only_right"),
        ("test", "test", "same"),
        ("done", "done", "same"),
    ]


def test_a_removed_step_stands_alone_on_the_left():
    right = baseline()
    del right[1]
    assert statuses(align(baseline(), right)) == [
        ("read", "read", "same"),
        ("edit", None, "only_left"),
        ("test", "test", "same"),
        ("done", "done", "same"),
    ]


def test_the_same_tool_with_other_arguments_or_results_is_changed():
    right = baseline()
    right[1] = signed("edit2", ("write_file", {"path": "a.py", "content": "x = 2\n"}))
    right[2] = signed("test2", ("bash", {"cmd": "pytest -q"}), result="1 failed")
    assert statuses(align(baseline(), right)) == [
        ("read", "read", "same"),
        ("edit", "edit2", "changed"),
        ("test", "test2", "changed"),
        ("done", "done", "same"),
    ]


def test_different_tools_at_the_same_place_are_never_a_pair():
    right = baseline()
    right[1] = signed("patch", ("apply_patch", {"path": "a.py", "content": "x = 1\n"}))
    assert statuses(align(baseline(), right)) == [
        ("read", "read", "same"),
        ("edit", None, "only_left"),
        (None, "patch", "only_right"),
        ("test", "test", "same"),
        ("done", "done", "same"),
    ]


def test_arguments_are_compared_normalised():
    left = [signed(1, ("bash", {"cmd": "ls  -la", "cwd": "/app"}))]
    right = [signed(1, ("bash", '{"cwd": "/app", "cmd": "ls -la"}'))]  # a JSON string, keys in another order
    assert statuses(align(left, right)) == [(1, 1, "same")]


def test_messages_pair_by_source_and_text():
    left = [signed(1, message="I will read the file."), signed(2, message="Done.")]
    right = [signed(1, message="I will read the file."), signed(2, message="Finished.")]
    assert statuses(align(left, right)) == [(1, 1, "same"), (2, 2, "changed")]


def test_a_window_stops_at_its_last_pair_so_the_next_one_can_match_past_it():
    left = [signed(n, ("bash", {"cmd": str(n)})) for n in range(4)]
    right = [signed(0, ("bash", {"cmd": "0"})), signed(1, ("read_file", {"path": "x"}))]
    settled = align_window(left, right, left_ends=False, right_ends=False)
    assert statuses(settled.pairs) == [(0, 0, "same")]
    assert (settled.left_used, settled.right_used) == (1, 1)
    settled = align_window(left, right, left_ends=True, right_ends=True)
    assert settled.left_used == 4 and settled.right_used == 2


# Through an import, the API and the page --------------------------------------------------------


def trajectory_steps(extra=None, edit="x = 1\n"):
    steps = [
        {"step_id": 1, "source": "user", "message": "fix the bug"},
        tool_step(2, "read_file", {"path": "a.py"}, "x = 0\n"),
        tool_step(3, "write_file", {"path": "a.py", "content": edit}),
        tool_step(4, "bash", {"cmd": "pytest -q"}, "1 passed"),
    ]
    if extra:
        steps.insert(2, extra)
    for number, step in enumerate(steps, 1):
        step["step_id"] = number
    return steps


@pytest.fixture
def pair_of_trials(db, tmp_path):
    """Two attempts of task-a: the right one reads one more file and writes other content."""
    left = import_trial_dir(write_trial(tmp_path / "l", "task-a__LLLLLLL", steps=trajectory_steps()))
    extra = tool_step(0, "read_file", {"path": "b.py"})
    right = import_trial_dir(write_trial(tmp_path / "r", "task-a__RRRRRRR", steps=trajectory_steps(extra, "x = 2\n")))
    return left, right


def test_the_import_signs_every_step_with_its_prefix(pair_of_trials):
    left, right = pair_of_trials
    rows = list(Step.objects.filter(trial=left).order_by("index").values_list("align_key", "signature", "chain"))
    assert len(rows) == 4 and all(len(value) == 16 for row in rows for value in row)
    assert len({chain for _, _, chain in rows}) == 4
    other = list(Step.objects.filter(trial=right).order_by("index").values_list("chain", flat=True))
    assert other[:2] == [chain for _, _, chain in rows[:2]] and other[2] != rows[2][2]


def test_the_align_api_pairs_steps_and_names_the_first_divergence(client_logged_in, pair_of_trials):
    left, right = pair_of_trials
    answer = client_logged_in.get(reverse("api-trial-align", args=[left.pk, right.pk])).json()
    assert answer["pairs"] == [
        {"left": 1, "right": 1, "status": "same"},
        {"left": 2, "right": 2, "status": "same"},
        {"left": None, "right": 3, "status": "only_right"},
        {"left": 3, "right": 4, "status": "changed"},
        {"left": 4, "right": 5, "status": "same"},
    ]
    assert answer["first_divergence"] == {"left": None, "right": 3}
    assert answer["identical_prefix"] == 2 and answer["next"] is None


def test_the_align_api_answers_a_window_and_links_the_next(client_logged_in, pair_of_trials):
    left, right = pair_of_trials
    url = reverse("api-trial-align", args=[left.pk, right.pk])
    first = client_logged_in.get(url, {"size": 2}).json()
    assert first["pairs"] == [{"left": 1, "right": 1, "status": "same"}, {"left": 2, "right": 2, "status": "same"}]
    second = client_logged_in.get(first["next"]).json()
    assert second["pairs"][0] == {"left": None, "right": 3, "status": "only_right"}
    assert first["first_divergence"] == second["first_divergence"] == {"left": None, "right": 3}


def test_a_trial_aligned_with_itself_has_no_divergence(client_logged_in, pair_of_trials):
    left, _ = pair_of_trials
    answer = client_logged_in.get(reverse("api-trial-align", args=[left.pk, left.pk])).json()
    assert {p["status"] for p in answer["pairs"]} == {"same"}
    assert answer["first_divergence"] == {"left": None, "right": None}


def test_the_align_api_needs_a_login_and_known_trials_of_one_task(client, user, pair_of_trials, tmp_path):
    left, right = pair_of_trials
    url = reverse("api-trial-align", args=[left.pk, right.pk])
    assert client.get(url).status_code == 401
    client.force_login(user)
    assert client.get(reverse("api-trial-align", args=[left.pk, 999_999])).status_code == 404
    other_task = import_trial_dir(write_trial(tmp_path / "o", "task-b__OOOOOOO"))
    refused = client.get(reverse("api-trial-align", args=[left.pk, other_task.pk]))
    assert refused.status_code == 400
    assert "not of the same task" in refused.json()["trials"][0]


def test_the_page_marks_the_first_divergence_and_links_each_step(client_logged_in, pair_of_trials):
    left, right = pair_of_trials
    page = client_logged_in.get(reverse("trial-side-by-side", args=[left.pk, right.pk]))
    html = page.content.decode()
    assert page.status_code == 200
    assert 'class="pair status-only_right" tabindex="-1" id="first-divergence"' in html
    # People read the status and the divergence in words, not as the API's identifiers.
    assert ">right only</span>" in html and ">only_right<" not in html
    assert 'First divergence: <a href="#first-divergence">no left step · right #3</a>' in html
    assert f'href="/trials/{right.pk}/steps/3/#step-3"' in html
    assert f'href="/trials/{left.pk}/steps/3/#step-3"' in html


def test_the_trial_page_offers_the_other_attempts_to_compare_with(client_logged_in, pair_of_trials):
    left, right = pair_of_trials
    html = client_logged_in.get(reverse("trial-detail", args=[left.pk])).content.decode()
    assert reverse("trial-side-by-side", args=[left.pk, right.pk]) in html


def test_the_page_refuses_trials_of_different_tasks(client_logged_in, pair_of_trials, tmp_path):
    left, _ = pair_of_trials
    other_task = import_trial_dir(write_trial(tmp_path / "o", "task-b__OOOOOOO"))
    page = client_logged_in.get(reverse("trial-side-by-side", args=[left.pk, other_task.pk]))
    assert page.status_code == 400
    assert "not of the same task" in page.content.decode()


def test_the_first_divergence_deep_in_a_long_pair_is_found_from_the_prefix_hashes(client_logged_in, tmp_path):
    steps = [tool_step(n, "bash", {"cmd": f"echo {n}"}) for n in range(1, 301)]
    left = import_trial_dir(write_trial(tmp_path / "l", "task-a__LLLLLLL", steps=steps))
    steps[236] = tool_step(237, "bash", {"cmd": "echo other"})
    right = import_trial_dir(write_trial(tmp_path / "r", "task-a__RRRRRRR", steps=steps))
    answer = client_logged_in.get(reverse("api-trial-align", args=[left.pk, right.pk]), {"left": 230, "right": 230})
    answer = answer.json()
    assert answer["identical_prefix"] == 236
    assert answer["first_divergence"] == {"left": 237, "right": 237}
    assert [p["status"] for p in answer["pairs"][:9]] == ["same"] * 7 + ["changed", "same"]


def test_arguments_nested_past_what_orjson_writes_still_sign_and_show(client_logged_in, tmp_path):
    def trial_with(name, bottom):
        steps = [tool_step(1, "bash", {"cmd": "DEEP"}), tool_step(2, "bash", {"cmd": "BIG"})]
        folder = write_trial(tmp_path / name, f"task-a__{name * 7}", steps=steps)
        path = folder / "agent" / "trajectory.json"  # orjson writes neither: 600 levels, 71 bits
        deep = b"[" * 600 + f'"{bottom}"'.encode() + b"]" * 600
        path.write_bytes(path.read_bytes().replace(b'"DEEP"', deep).replace(b'"BIG"', str(2**70).encode()))
        return import_trial_dir(folder)

    left, right = trial_with("L", "bottom"), trial_with("R", "bottom-2")
    answer = client_logged_in.get(reverse("api-trial-align", args=[left.pk, right.pk])).json()
    assert [p["status"] for p in answer["pairs"]] == ["changed", "same"]
    page = client_logged_in.get(reverse("trial-side-by-side", args=[left.pk, right.pk]))
    assert page.status_code == 200 and "bash({&quot;cmd&quot;: [[[[" in page.content.decode()


@pytest.mark.django_db(transaction=True)
def test_the_migration_signs_steps_imported_before_it_as_the_import_does(tmp_path):
    long_result = "line\n" * 1000  # a result longer than the preview its row keeps
    steps = trajectory_steps(tool_step(0, "bash", {"cmd": "cat log"}, long_result))
    trial = import_trial_dir(write_trial(tmp_path, "task-a__MMMMMMM", steps=steps))
    signed = list(Step.objects.filter(trial=trial).order_by("index").values_list("align_key", "signature", "chain"))
    migrate_to(("trials", "0021_trajectories_withhold_redacted_values"))
    migrate_to()
    assert (
        list(Step.objects.filter(trial=trial).order_by("index").values_list("align_key", "signature", "chain"))
        == signed
    )


def test_the_page_opens_at_a_divergence_after_which_nothing_pairs(client_logged_in, tmp_path):
    common = [tool_step(n, "read_file", {"path": f"{n}.py"}) for n in range(1, 11)]
    left_steps = common + [tool_step(n, "bash", {"cmd": str(n)}) for n in range(11, 80)]
    right_steps = common + [tool_step(n, "write_file", {"path": str(n)}) for n in range(11, 80)]
    left = import_trial_dir(write_trial(tmp_path / "l", "task-a__LLLLLLL", steps=left_steps))
    right = import_trial_dir(write_trial(tmp_path / "r", "task-a__RRRRRRR", steps=right_steps))
    html = client_logged_in.get(reverse("trial-side-by-side", args=[left.pk, right.pk])).content.decode()
    assert 'class="pair status-only_left" tabindex="-1" id="first-divergence"' in html
    assert f'href="/trials/{left.pk}/steps/11/#step-11">11</a>' in html
