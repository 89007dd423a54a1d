"""todo_write keeps the run's plan; remember keeps dated notes in a file between runs."""
import os
import threading
from datetime import date

import pytest

from agent.tools import Memory, Plan, Registry


def test_todo_write_replaces_the_plan_and_shows_it_as_a_checklist():
    seen = []
    plan = Plan(on_change=seen.append)
    registry = Registry([plan.tool])
    todos = [{"content": "find the Python files", "status": "completed"},
             {"content": "count  their\nlines", "status": "in_progress"},
             {"content": "write the report", "status": "pending"}]
    assert registry.call("todo_write", {"todos": todos}).text == (
        "Plan, 1 of 3 done:\n[x] find the Python files\n[ ] count their lines (in progress)\n[ ] write the report")
    assert plan.todos[1] == {"content": "count their lines", "status": "in_progress"} and seen == [plan.todos]
    assert registry.call("todo_write", {"todos": []}).text == "(the plan is empty)" and plan.todos == []
    assert plan.tool.keep_latest and not plan.tool.writes


@pytest.mark.parametrize("todos, problem", [
    ([{"content": "a", "status": "in_progress"}, {"content": "b", "status": "in_progress"}],
     "error: 2 steps are in_progress (a; b); mark only the one you are doing now in_progress"),
    ([{"content": "a", "status": "done"}], "error: arguments for todo_write: $.todos[0].status"),
    ([{"content": "", "status": "pending"}], "error: arguments for todo_write: $.todos[0].content"),
    ([{"content": "a"}], "error: arguments for todo_write: $.todos[0]: 'status' is a required property"),
    ([{"content": "a", "status": "pending"}] * 21, "error: arguments for todo_write: $.todos: "),
    ("a, b", "error: arguments for todo_write: $.todos: 'a, b' is not of type 'array'"),
])
def test_a_bad_plan_is_refused_with_what_to_fix_and_the_old_one_stays(todos, problem):
    plan = Plan()
    registry = Registry([plan.tool])
    registry.call("todo_write", {"todos": [{"content": "keep me", "status": "pending"}]})
    assert registry.call("todo_write", {"todos": todos}).text.startswith(problem)
    assert plan.todos == [{"content": "keep me", "status": "pending"}]


def test_remember_appends_dated_lines_that_read_gives_back(tmp_path):
    memory = Memory(tmp_path / "memory.md", today=lambda: date(2025, 3, 14))
    assert memory.read() == "" and not (tmp_path / "memory.md").exists()
    registry = Registry([memory.tool])
    assert registry.call("remember", {"note": "The report goes\nin out/."}).text == \
        "remembered: The report goes in out/."
    assert registry.call("remember", {"note": "Use metric units."}).ok
    assert (tmp_path / "memory.md").read_text() == \
        "- 2025-03-14: The report goes in out/.\n- 2025-03-14: Use metric units.\n"
    assert memory.read() == "- 2025-03-14: The report goes in out/.\n- 2025-03-14: Use metric units."
    assert memory.tool.writes
    assert registry.call("remember", {"note": "  "}).text == "error: the note is empty; say what to remember"
    assert registry.call("remember", {"note": "x" * 501}).text.startswith("error: the note is 501 characters long")


def test_past_the_cap_the_oldest_notes_are_dropped_and_only_the_newest_are_read(tmp_path):
    path = tmp_path / "memory.md"
    memory = Memory(path, max_chars=130, today=lambda: date(2025, 1, 2))
    for n in range(3):
        memory.remember(f"note {n} " + "x" * 20)
    assert memory.remember("note 3").endswith("(1 of the oldest notes dropped to keep the file small)")
    assert [line.split(": ")[1].split()[1] for line in path.read_text().splitlines()] == ["1", "2", "3"]
    path.write_text("".join(f"- old line {n}\n" for n in range(10_000)))  # a file grown by hand
    assert memory.read().splitlines()[-1] == "- old line 9999" and len(memory.read()) <= 130


def test_notes_remembered_at_once_are_all_kept(tmp_path):
    memory = Memory(tmp_path / "memory.md")
    threads = [threading.Thread(target=memory.remember, args=(f"note {n}",)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(memory.read().splitlines()) == 8 and not list(tmp_path.glob(".tmp*"))


def test_an_unwritable_memory_file_is_an_error_result(tmp_path):
    registry = Registry([Memory(tmp_path / "no-such-folder" / "memory.md").tool])
    assert registry.call("remember", {"note": "x"}).text.startswith("error: cannot write the memory file")


@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "folder"])
def test_a_memory_file_that_is_no_regular_file_is_an_error_at_once(tmp_path, special):
    """Library use, or a file swapped after the command line checked it: neither waits nor reads without end."""
    path = {"fifo": tmp_path / "fifo", "/dev/zero": "/dev/zero", "folder": tmp_path}[special]
    if special == "fifo":
        os.mkfifo(path)
    memory, outcome = Memory(path), []
    reader = threading.Thread(target=lambda: outcome.append(Registry([memory.tool]).call("remember", {"note": "x"})),
                              daemon=True)
    reader.start()
    reader.join(timeout=10)
    assert outcome and outcome[0].text == f"error: the memory file {str(path)!r} is not a regular file (a device, a " \
                                          "FIFO or a folder); use a file, like memory.md"
