"""BFCL as a suite source: `agent eval bfcl:...` on hand-written data in BFCL's format (its questions and
possible answers, a few items a category), the conversion of each category, the `bfcl_match` check's rules
(BFCL's AST checker's), the seeded sample, the live categories kept back, broken data, and the command
against the scripted server in the prompt and native arms."""
import importlib.metadata
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from agent.cli import main
from agent.config import ConfigError, Settings
from agent.evaluation.bfcl import FLOAT_NOTE, MAX_FILE_BYTES, PYTHON_NOTE, load_bfcl
from agent.evaluation.runner import run_task
from agent.evaluation.suites import check_run, load_suite, make_task, sample
from agent.models import Reply, ScriptedModel
from agent.protocols import NativeProtocol, PromptProtocol
from tests.support import child_env
from tests.test_evaluation import cells, suite_file

ROOT = Path(__file__).resolve().parent.parent


def function(name: str, description: str, required: list[str], **properties) -> dict:
    return {"name": name, "description": description,
            "parameters": {"type": "dict", "properties": properties, "required": required}}


def question(*messages) -> list:
    return [[{"role": role, "content": content} for role, content in messages]]


FACTORIAL = function("math.factorial", "Calculate the factorial of a number.", ["number"],
                     number={"type": "integer", "description": "The number."})
WEATHER = function("weather.get", "Current weather and forecast of a city.", ["city"],
                   city={"type": "string", "description": "The city."},
                   unit={"type": "string", "description": "The unit.", "enum": ["celsius", "fahrenheit"]},
                   days={"type": "integer", "description": "Days of forecast.", "default": 1},
                   threshold={"type": "float", "description": "Alert above this."},
                   point={"type": "tuple", "items": {"type": "float"}, "description": "Latitude and longitude."},
                   options={"type": "dict", "description": "Options.",
                            "properties": {"hourly": {"type": "boolean", "description": "Hour by hour."},
                                           "margin": {"type": "float", "description": "Margin."}}},
                   extra={"type": "any", "description": "Anything else."},
                   tags={"type": "array", "items": {"type": "string"}, "description": "Tags."})
CIRCLE = function("circle.area", "Area of a circle.", ["radius"], radius={"type": "float", "description": "Radius."})
SQUARE = function("square_area", "Area of a square.", ["side"], side={"type": "float", "description": "Side."})
PLAY = function("spotify.play", "Play an artist's songs for a while.", ["artist", "duration"],
                artist={"type": "string", "description": "The artist."},
                duration={"type": "integer", "description": "Minutes."})
CONVERT = function("convert_length", "Convert a length.", ["value", "unit_from", "unit_to"],
                   value={"type": "float", "description": "The length."},
                   unit_from={"type": "string", "description": "From."}, unit_to={"type": "string", "description": "To."})
CLOCK = function("time.now", "The time in a city.", ["city"], city={"type": "string", "description": "The city."})
BMI = function("bmi.calculate", "Body mass index.", ["weight", "height"],
               weight={"type": "float", "description": "Kilograms."}, height={"type": "float", "description": "Metres."})

DATA = {
    "simple_python": [
        ({"id": "simple_python_0", "question": question(("user", "What is the factorial of 5?")), "function": [FACTORIAL]},
         [{"math.factorial": {"number": [5]}}]),
        ({"id": "simple_python_1", "question": question(("user", "Weather in New York, celsius, for 3 days.")),
          "function": [WEATHER]},
         [{"weather.get": {"city": ["New York", "NYC"], "unit": ["celsius", ""], "days": [3], "threshold": [""],
                           "point": ["", [40.7, -74.0]], "options": ["", {"hourly": [True, ""]}], "extra": [""],
                           "tags": ["", ["rain", "wind"]]}}]),
    ],
    "multiple": [
        ({"id": "multiple_0", "question": question(("user", "Area of a square with side 4?")),
          "function": [CIRCLE, SQUARE]}, [{"square_area": {"side": [4.0]}}]),
    ],
    "parallel": [
        ({"id": "parallel_0", "question": question(("user", "Play Taylor Swift for 20 minutes and Maroon 5 for 15.")),
          "function": [PLAY]},
         [{"spotify.play": {"artist": ["Taylor Swift"], "duration": [20]}},
          {"spotify.play": {"artist": ["Maroon 5"], "duration": [15]}}]),
    ],
    "parallel_multiple": [
        ({"id": "parallel_multiple_0", "question": question(("user", "Convert 5 km to miles; what time is it in Tokyo?")),
          "function": [CONVERT, CLOCK]},
         [{"convert_length": {"value": [5.0], "unit_from": ["km", "kilometers"], "unit_to": ["miles", "mi"]}},
          {"time.now": {"city": ["Tokyo"]}}]),
    ],
    "irrelevance": [
        ({"id": "irrelevance_0", "question": question(("user", "Who painted the Mona Lisa?")), "function": [BMI]}, None),
    ],
    "live_simple": [
        ({"id": "live_simple_0-0-0", "question": question(("system", "Answer as a pirate."),
                                                          ("user", "Factorial of 6, matey?")),
          "function": [FACTORIAL]}, [{"math.factorial": {"number": [6]}}]),
    ],
    "live_irrelevance": [
        ({"id": "live_irrelevance_0-0-0", "question": question(("user", "Hi"), ("assistant", "Hello! How can I help?"),
                                                               ("user", "Tell me a joke.")),
          "function": [BMI]}, None),
        ({"id": "live_irrelevance_1-0-1", "question": question(("user", "Hello")), "function": []}, None),
    ],
}
FIVE = "bfcl:simple_python,multiple,parallel,parallel_multiple,irrelevance"


def write_data(folder: Path, data=None) -> Path:
    """A folder laid out as BFCL's data (BFCL_v4_<category>.json and possible_answer/), one JSON object a line."""
    (folder / "possible_answer").mkdir(parents=True, exist_ok=True)
    for category, items in (data or DATA).items():
        (folder / f"BFCL_v4_{category}.json").write_text("".join(json.dumps(q) + "\n" for q, _ in items))
        if items[0][1] is not None:
            (folder / "possible_answer" / f"BFCL_v4_{category}.json").write_text(
                "".join(json.dumps({"id": q["id"], "ground_truth": a}) + "\n" for q, a in items))
    return folder


@pytest.fixture
def data(tmp_path) -> Path:
    return write_data(tmp_path / "bfcl")


def tasks_of(categories: str, folder: Path, **options) -> dict:
    return {t.id: t for t in load_bfcl(categories, str(folder), **options).tasks}


# --- conversion ------------------------------------------------------------------------------------------

def test_simple_python_items_become_lines_with_the_tools_as_bfcl_converts_them_for_openai(data):
    tasks = tasks_of("simple_python", data)
    factorial, weather = tasks["simple_python_0"], tasks["simple_python_1"]
    assert factorial.task == "What is the factorial of 5?" and factorial.category == "simple_python"
    assert factorial.one_reply and not factorial.instructions and not factorial.history
    assert factorial.tools == [{"type": "function", "function": {
        "name": "math_factorial", "description": "Calculate the factorial of a number." + PYTHON_NOTE,
        "parameters": {"type": "object", "properties": {"number": {"type": "integer", "description": "The number."}},
                       "required": ["number"]}}}]
    assert factorial.checks == {"bfcl_match": [{"tool": "math_factorial", "arguments": {"number": [5]},
                                                "parameters": factorial.tools[0]["function"]["parameters"]}]}
    assert weather.tools[0]["function"]["parameters"]["properties"] == {
        "city": {"type": "string", "description": "The city."},
        "unit": {"type": "string", "description": "The unit.", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "description": "Days of forecast.", "default": 1},
        "threshold": {"type": "number", "format": "float", "description": "Alert above this." + FLOAT_NOTE},
        "point": {"type": "array", "items": {"type": "number"}, "description": "Latitude and longitude."},
        "options": {"type": "object", "description": "Options.", "properties": {
            "hourly": {"type": "boolean", "description": "Hour by hour."},
            "margin": {"type": "number", "format": "float", "description": "Margin." + FLOAT_NOTE}}},
        "extra": {"type": "string", "description": "Anything else."},
        "tags": {"type": "array", "items": {"type": "string"}, "description": "Tags."}}
    assert FACTORIAL["parameters"]["type"] == "dict"  # the data itself is left as it was


def test_multiple_parallel_and_parallel_multiple_expect_each_possible_answer(data):
    tasks = tasks_of("multiple,parallel,parallel_multiple", data)
    assert [t["function"]["name"] for t in tasks["multiple_0"].tools] == ["circle_area", "square_area"]

    def expected(task_id):
        return [(c["tool"], c["arguments"]) for c in tasks[task_id].checks["bfcl_match"]]

    assert expected("multiple_0") == [("square_area", {"side": [4.0]})]
    assert expected("parallel_0") == [("spotify_play", {"artist": ["Taylor Swift"], "duration": [20]}),
                                      ("spotify_play", {"artist": ["Maroon 5"], "duration": [15]})]
    assert [tool for tool, _ in expected("parallel_multiple_0")] == ["convert_length", "time_now"]
    assert all(t.one_reply for t in tasks.values()) and [t.category for t in tasks.values()] == [
        "multiple", "parallel", "parallel_multiple"]


def test_irrelevance_items_expect_no_call(data):
    [task] = tasks_of("irrelevance", data).values()
    assert task.checks == {"no_call": True} and task.tools[0]["function"]["name"] == "bmi_calculate"


def test_live_items_keep_a_system_message_as_instructions_and_earlier_turns_as_history(data):
    benchmark = load_bfcl("live_simple,live_irrelevance", str(data), release=True)
    tasks = {t.id: t for t in benchmark.tasks}
    assert tasks["live_simple_0-0-0"].instructions == "Answer as a pirate."
    assert tasks["live_simple_0-0-0"].task == "Factorial of 6, matey?"
    joke = tasks["live_irrelevance_0-0-0"]
    assert joke.history == [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello! How can I help?"}]
    assert joke.task == "Tell me a joke." and joke.checks == {"no_call": True}
    assert "live_irrelevance_1-0-1" not in tasks and benchmark.left_out == {"live_irrelevance": 1}


def test_the_data_is_read_from_a_wheel_too(data, tmp_path):
    wheel = tmp_path / "bfcl_eval-2026.3.23-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path in data.rglob("*.json"):
            archive.write(path, f"bfcl_eval/data/{path.relative_to(data).as_posix()}")
    benchmark = load_bfcl("parallel", str(wheel))
    assert benchmark.source == f"{wheel.name} (a wheel)" and [t.id for t in benchmark.tasks] == ["parallel_0"]


def installed_copy(data: Path, site: Path) -> Path:
    """``data`` installed as pip installs bfcl-eval: the package's data files, and its metadata listing them."""
    files = []
    for path in data.rglob("*.json"):
        target = site / "bfcl_eval" / "data" / path.relative_to(data)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
        files.append(target.relative_to(site).as_posix())
    info = site / "bfcl_eval-2026.3.23.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bfcl_eval\nVersion: 2026.3.23\n")
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in files + [f"{info.name}/METADATA", f"{info.name}/RECORD"]))
    return site


def test_the_installed_package_is_found_through_its_metadata(data, tmp_path):
    site = installed_copy(data, tmp_path / "site")
    env = child_env(PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]))
    listed = subprocess.run([sys.executable, "-m", "agent", "eval", "bfcl:multiple,irrelevance", "--list"],
                            capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == ["multiple_0\tmultiple\tArea of a square with side 4?",
                                          "irrelevance_0\tirrelevance\tWho painted the Mona Lisa?"]
    source = subprocess.run([sys.executable, "-c", "from agent.evaluation.bfcl import load_bfcl; "
                             "print(load_bfcl('parallel').source)"], capture_output=True, text=True, env=env, timeout=60)
    assert source.stdout == "bfcl-eval 2026.3.23\n", source.stderr
    (site / "bfcl_eval" / "data" / "BFCL_v4_parallel.json").unlink()  # a broken install: listed, not there
    damaged = subprocess.run([sys.executable, "-m", "agent", "eval", "bfcl:parallel", "--list"],
                             capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)
    assert damaged.returncode == 2 and damaged.stderr.startswith(
        "agent: cannot read bfcl-eval 2026.3.23: BFCL_v4_parallel.json: [Errno 2] No such file or directory")
    assert len(damaged.stderr.splitlines()) == 1


# --- scoring: BFCL's AST checker's rules -----------------------------------------------------------------

PLACE = {"type": "function", "function": {"name": "f", "description": "A function.", "parameters": {
    "type": "object", "required": ["city"], "properties": {
        "city": {"type": "string"}, "count": {"type": "integer"}, "ratio": {"type": "number"},
        "flag": {"type": "boolean"}, "tags": {"type": "array", "items": {"type": "string"}},
        "point": {"type": "array", "items": {"type": "number"}}, "options": {"type": "object"},
        "people": {"type": "array", "items": {"type": "object"}}, "note": {"type": "string", "default": "none"}}}}}
OTHER = {"type": "function", "function": {"name": "g", "description": "Another.", "parameters": {
    "type": "object", "properties": {"x": {"type": "integer"}}}}}


def scored(expected: list[dict], *made: tuple[str, dict]) -> dict:
    task = make_task({"id": "t", "task": "x", "tools": [PLACE, OTHER], "checks": {"bfcl_match": expected}})
    [result] = check_run(task.checks, "", [{"tool": tool, "arguments": arguments} for tool, arguments in made], Path("."))
    return result


def f(**arguments) -> dict:
    return {"tool": "f", "arguments": arguments}


@pytest.mark.parametrize("possible, given, ok", [
    ({"city": ["New York"]}, {"city": "new york"}, True),
    ({"city": ["New York"]}, {"city": "New-York."}, True),  # spaces and ,./-_*^ do not count
    ({"city": ["April 1, 2024"]}, {"city": "april 1 2024"}, True),
    ({"city": ["it's"]}, {"city": 'IT"S'}, True),  # ' reads as "
    ({"city": ["New York"]}, {"city": "New Yorker"}, False),
    ({"city": ["Paris"], "count": [3]}, {"city": "Paris", "count": 3.0}, False),  # a number is not an integer
    ({"city": ["Paris"], "ratio": [3.0]}, {"city": "Paris", "ratio": 3}, True),  # an integer is a number
    ({"city": ["Paris"], "count": [1]}, {"city": "Paris", "count": True}, False),  # true is not 1
    ({"city": ["Paris"], "flag": [True]}, {"city": "Paris", "flag": 1}, False),
    ({"city": ["Paris"], "count": ["n"]}, {"city": "Paris", "count": "n"}, True),  # BFCL's "variable": compared as is
    ({"city": ["Paris"], "tags": [["Old Town", "river"]]}, {"city": "Paris", "tags": ["old-town", "River"]}, True),
    ({"city": ["Paris"], "tags": [["a", "b"]]}, {"city": "Paris", "tags": ["b", "a"]}, False),  # arrays in order
    ({"city": ["Paris"], "point": [[1.5, 2.0]]}, {"city": "Paris", "point": [1.5, 2]}, False),  # items: no int-to-float
    ({"city": ["Paris"], "options": [{"mode": ["Fast Lane"], "limit": [5, ""]}]},
     {"city": "Paris", "options": {"mode": "fast lane"}}, True),
    ({"city": ["Paris"], "options": [{"mode": ["fast"]}]}, {"city": "Paris", "options": {"mode": "fast", "x": 1}}, False),
    ({"city": ["Paris"], "options": [{"mode": ["fast"]}]}, {"city": "Paris", "options": {}}, False),
    ({"city": ["Paris"], "people": [[{"name": ["Ann"]}, {"name": ["Bo"]}]]},
     {"city": "Paris", "people": [{"name": "ann"}, {"name": "BO"}]}, True),
    ({"city": ["Paris"], "people": [[{"name": ["Ann"]}, {"name": ["Bo"]}]]},
     {"city": "Paris", "people": [{"name": "Bo"}, {"name": "Ann"}]}, False),
    ({"city": ["Paris"], "people": [[], ""]}, {"city": "Paris", "people": []}, True),
])
def test_values_are_compared_as_bfcl_compares_them(possible, given, ok):
    assert scored([f(**possible)], ("f", given))["ok"] is ok


@pytest.mark.parametrize("given, detail", [
    ({"city": "Paris"}, "1 of 1 expected calls made"),  # "" among the values: it may be left out
    ({"city": "Paris", "count": 2}, "1 of 1 expected calls made"),
    ({"city": "Paris", "count": 3}, "f: count=3 is none of [2, \"\"]"),
    ({"count": 2}, "f: city missing (required)"),
    ({"city": "Paris", "flag": True}, "f: unexpected argument flag"),  # not in the possible answer
    ({"city": "Paris", "note": "none"}, "f: unexpected argument note"),  # even given its documented default
])
def test_optional_required_and_unexpected_parameters(given, detail):
    assert scored([f(city=["Paris"], count=[2, ""])], ("f", given))["detail"] == detail
    assert scored([f(city=["Paris"], ratio=[0.5])], ("f", {"city": "Paris"}))["detail"] == (
        "f: ratio missing (it may not be left out)")


def test_parallel_calls_match_in_any_order_and_their_number_must_be_right():
    expected = [f(city=["Paris"], count=[1]), f(city=["Oslo"], count=[2])]
    assert scored(expected, ("f", {"city": "oslo", "count": 2}), ("f", {"city": "paris", "count": 1}))["ok"]
    assert scored(expected, ("f", {"city": "Paris", "count": 1}))["detail"] == "expected 2 calls, made 1"
    repeated = scored([f(city=["Paris"])], ("f", {"city": "Paris"}), ("f", {"city": "Paris"}))
    assert repeated["detail"] == "expected 1 call, made 2"  # calls_match would take an exact repeat
    wrong = scored(expected, ("f", {"city": "Paris", "count": 1}), ("f", {"city": "Oslo", "count": 3}))
    assert wrong["detail"] == "f: count=3 is none of [2]"


def test_each_expected_call_takes_the_first_call_that_fits_as_bfcl_does():
    # BFCL matches greedily: the first expected call takes the first call that fits it, even when another
    # assignment would fit both (a maximum matching would pass this; BFCL does not)
    expected = [f(city=["Paris"], count=[1, 2]), f(city=["Paris"], count=[1])]
    assert not scored(expected, ("f", {"city": "Paris", "count": 1}), ("f", {"city": "Paris", "count": 2}))["ok"]
    assert scored(expected, ("f", {"city": "Paris", "count": 2}), ("f", {"city": "Paris", "count": 1}))["ok"]


def test_a_call_to_another_function_of_a_multiple_item_fails():
    result = scored([{"tool": "g", "arguments": {"x": [1]}}], ("f", {"city": "Paris"}))
    assert result == {"check": "bfcl_match", "ok": False, "detail": "called f, expected g"}


def test_irrelevance_passes_without_a_call_and_fails_with_one(data):
    [task] = tasks_of("irrelevance", data).values()
    assert check_run(task.checks, "Leonardo da Vinci.", [], Path("."))[0]["ok"]
    made = [{"tool": "bmi_calculate", "arguments": {"weight": 70, "height": 1.8}}]
    assert check_run(task.checks, "", made, Path("."))[0] == {"check": "no_call", "ok": False,
                                                               "detail": "called: bmi_calculate"}


def test_where_calls_match_and_bfcl_match_differ():
    def both(pattern: dict, *made) -> tuple[bool, bool]:
        strict = {"tool": "f", "arguments": {k: [v for v in vs if v != ""] for k, vs in pattern.items()},
                  "optional": [k for k, vs in pattern.items() if "" in vs]}
        task = make_task({"id": "t", "task": "x", "tools": [PLACE, OTHER], "checks": {
            "calls_match": [strict], "bfcl_match": [f(**pattern)]}})
        ours, bfcl = check_run(task.checks, "", [{"tool": "f", "arguments": a} for a in made], Path("."))
        return ours["ok"], bfcl["ok"]

    assert both({"city": ["New York"]}, {"city": "new-york"}) == (False, True)  # punctuation and spaces
    assert both({"city": ["Paris"], "count": [3]}, {"city": "Paris", "count": 3.0}) == (True, False)  # types
    assert both({"city": ["Paris"]}, {"city": "Paris"}, {"city": "Paris"}) == (True, False)  # a repeated call
    assert both({"city": ["Paris"]}, {"city": "Paris", "note": "none"}) == (True, False)  # a documented default
    assert both({"city": ["Paris"], "count": [2, ""]}, {"city": "Paris"}) == (True, True)


@pytest.mark.parametrize("line, problem", [
    ({"checks": {"bfcl_match": [f(city=["x"])]}}, "bfcl_match reads the types of the line's own tools"),
    ({"tools": [PLACE], "checks": {"bfcl_match": [{"tool": "h", "arguments": {}}]}}, "unknown tool h"),
    ({"tools": [PLACE], "checks": {"bfcl_match": [f(city=["x"])], "no_call": True}}, "no_call and bfcl_match contradict"),
    ({"tools": [{"type": "function", "function": {"name": "f", "description": "d", "parameters": {
        "type": "object", "properties": {"v": {"type": ["string", "null"]}}}}}],
      "checks": {"bfcl_match": [{"tool": "f", "arguments": {"v": ["x"]}}]}},
     "parameter 'v' of f has the type [\"string\", \"null\"]; bfcl_match reads one of string, integer"),
    ({"tools": [PLACE], "history": [{"role": "system", "content": "x"}], "checks": {"no_call": True}},
     "history/0/role: 'system' is not one of ['user', 'assistant']"),
])
def test_a_line_bfcl_match_cannot_read_is_refused(tmp_path, line, problem):
    with pytest.raises(ConfigError, match="line 1: .*" + problem.replace("[", r"\[").replace("(", r"\(")):
        load_suite(suite_file(tmp_path, {"id": "t", "task": "x", **line}), {"calculator"})


# --- one reply, as BFCL scores one response --------------------------------------------------------------

def test_a_run_of_a_bfcl_item_ends_at_its_first_usable_reply_and_runs_nothing(data):
    task = tasks_of("parallel", data)["parallel_0"]
    model = ScriptedModel(["not JSON at all", json.dumps([
        {"type": "tool_call", "tool": "spotify_play", "arguments": {"artist": "Maroon 5", "duration": 15}},
        {"type": "tool_call", "tool": "spotify_play", "arguments": {"artist": "Taylor Swift", "duration": 20}}])])
    record = run_task(task, PromptProtocol, model, Settings(), "prompt")
    assert (record["status"], record["passed"], record["model_calls"], record["reasks"], record["steps"]) == (
        "final", True, 2, 1, 0)
    assert [c["arguments"]["artist"] for c in record["tool_calls"]] == ["Maroon 5", "Taylor Swift"]
    assert json.loads(record["answer"])[0] == {"tool": "spotify_play", "arguments": {"artist": "Maroon 5", "duration": 15}}
    assert [e["event"] for e in record["transcript"]] == ["reply", "reask", "reply", "final"]  # no tool ran
    assert not model.replies


def test_a_native_reply_with_one_malformed_call_is_scored_with_it(data):
    task = tasks_of("parallel", data)["parallel_0"]
    reply = Reply(tool_calls=[
        {"id": "a", "type": "function", "function": {"name": "spotify_play", "arguments": '{"artist": "Taylor Swift", "duration": 20}'}},
        {"id": "b", "type": "function", "function": {"name": "spotify_play", "arguments": '{"artist": "Maroon 5"}'}}],
        finish_reason="tool_calls")
    record = run_task(task, NativeProtocol, ScriptedModel([reply]), Settings(), "native")
    assert [c["ok"] for c in record["tool_calls"]] == [True, False] and record["model_calls"] == 1
    assert not record["passed"] and record["checks"][0]["detail"] == "spotify_play: duration missing (required)"


def test_instructions_and_history_of_a_line_reach_the_model(tmp_path):
    line = {"id": "t", "task": "And now?", "instructions": "Answer in French.", "one_reply": True,
            "history": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Bonjour"}],
            "tools": [OTHER], "checks": {"no_call": True}}
    [task] = load_suite(suite_file(tmp_path, line), set())
    model = ScriptedModel([Reply(content="Rien.")])
    assert run_task(task, NativeProtocol, model, Settings(), "native")["passed"]
    system, *rest = model.calls[0]["messages"]
    assert system["content"].endswith("Instructions from the user:\nAnswer in French.\n")
    assert rest == [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Bonjour"},
                    {"role": "user", "content": "And now?"}]


# --- the sample --------------------------------------------------------------------------------------------

def numbered_suite(tmp_path, per_category=10) -> list:
    lines = [{"id": f"{c}{i}", "category": c, "task": "What is 2+2?", "checks": {"answer_number": 4}}
             for c in ("a", "b") for i in range(per_category)]
    return load_suite(suite_file(tmp_path, *lines), set())


def test_the_seeded_sample_is_stable_nested_and_per_category(tmp_path):
    tasks = numbered_suite(tmp_path)
    three = [t.id for t in sample(tasks, 3, seed=1)]
    assert three == ["a3", "a4", "a8", "b4", "b7", "b8"]  # pinned: the same seed draws the same tasks, always
    assert three == [t.id for t in sample(list(reversed(tasks)), 3, seed=1)][::-1]
    assert set(three) < {t.id for t in sample(tasks, 5, seed=1)}  # a larger sample keeps the smaller one
    assert three != [t.id for t in sample(tasks, 3, seed=2)]
    assert len(sample(tasks, 40, seed=1)) == 20


def test_eval_samples_any_suite_and_bfcl_items_alike(tmp_path, data, capsys):
    numbered_suite(tmp_path)
    assert main(["eval", str(tmp_path / "suite.jsonl"), "--sample", "3", "--seed", "1", "--list"]) == 0
    assert [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()] == ["a3", "a4", "a8", "b4", "b7", "b8"]
    everything = load_bfcl(FIVE[5:], str(data)).tasks
    assert [t.id for t in load_bfcl(FIVE[5:], str(data), sample=1, seed=7).tasks] == [
        t.id for t in sample(everything, 1, seed=7)]
    assert [t.category for t in load_bfcl(FIVE[5:], str(data), sample=1, seed=7).tasks] == [
        "simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance"]


# --- refused: the release test set, a missing install, broken data -----------------------------------------

def error_line(capsys, *argv) -> str:
    code = main(["eval", *argv])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_the_live_categories_need_the_release_flag(data, capsys, server):
    line = error_line(capsys, "bfcl:simple_python,live_simple", "--bfcl-data", str(data), "--base-url", server.url)
    assert line == ("agent: live_simple: BFCL's live categories are the project's release test set, run only to check "
                    "a release, never while working on the prompt; add --release-test-set for that")
    assert main(["eval", "bfcl:live_simple", "--bfcl-data", str(data), "--release-test-set", "--list"]) == 0
    assert capsys.readouterr().out.startswith("live_simple_0-0-0\tlive_simple\t")
    assert not server.requests


@pytest.mark.skipif(any(d.metadata["Name"].lower().replace("_", "-") == "bfcl-eval"
                        for d in importlib.metadata.distributions()), reason="bfcl-eval is installed here")
def test_without_bfcl_eval_installed_the_error_gives_the_command(capsys, workspace):
    assert error_line(capsys, FIVE, "--sample", "40") == (
        "agent: the BFCL data is not installed: pip install --no-deps bfcl-eval (or pass --bfcl-data with a "
        "bfcl-eval wheel or folder)")


def broken(data: Path, name: str, change) -> None:
    path = data / name
    path.write_text(change(path.read_text()))


@pytest.mark.parametrize("name, change, message", [
    ("BFCL_v4_multiple.json", lambda text: text + '{"id": "multiple_1", "question": \n',
     "BFCL_v4_multiple.json, line 2: not valid JSON: Expecting value (column 34); the file is damaged, install it "
     "again: pip install --no-deps bfcl-eval --force-reinstall"),
    ("BFCL_v4_multiple.json", lambda text: text.replace('"type": "float"', '"type": "floot"', 1),
     "item multiple_0: function circle.area: parameter radius has the type \"floot\", which is none of BFCL's "
     "Python types (string, integer, float, boolean, array, tuple, dict, any)"),
    ("BFCL_v4_multiple.json", lambda text: text.replace('"function": [', '"function": {"x": [', 1).replace(
        ']}\n', ']}}\n'), "line 1: function: {'x': "),
    ("possible_answer/BFCL_v4_multiple.json", lambda text: text.replace("multiple_0", "multiple_9"),
     "item multiple_0: no possible answer for it in possible_answer/BFCL_v4_multiple.json"),
    ("possible_answer/BFCL_v4_multiple.json", lambda text: text.replace('[4.0]', '4.0'),
     "possible_answer/BFCL_v4_multiple.json, line 1: ground_truth/0/square_area/side: 4.0 is not of type 'array'"),
])
def test_broken_data_is_one_clear_line(data, capsys, name, change, message):
    broken(data, name, change)
    assert message in error_line(capsys, "bfcl:multiple", "--bfcl-data", str(data), "--list")


def test_a_huge_file_is_refused_before_it_is_read(data, capsys):
    with open(data / "BFCL_v4_parallel.json", "ab") as huge:
        huge.truncate(MAX_FILE_BYTES + 1)  # sparse: nothing is written
    assert error_line(capsys, "bfcl:parallel", "--bfcl-data", str(data), "--list") == (
        f"agent: {data} (a folder): BFCL_v4_parallel.json is 50 MB, more than BFCL's files could be (50 MB); "
        "reinstall it: pip install --no-deps bfcl-eval --force-reinstall")


@pytest.mark.parametrize("argv, message", [
    (["bfcl:", "--bfcl-data", "{data}"], "agent: bfcl: names no category; e.g. bfcl:simple_python,multiple,parallel,"
                                         "parallel_multiple,irrelevance"),
    (["bfcl:simple", "--bfcl-data", "{data}"], "agent: no BFCL category simple; the categories are simple_python, "),
    (["bfcl:simple_python", "--bfcl-data", "{data}/nowhere"], "no such file or folder; pass a bfcl-eval .whl"),
    (["bfcl:simple_python", "--bfcl-data", "{data}/BFCL_v4_multiple.json"], "not a wheel (File is not a zip file)"),
    (["bfcl:live_parallel", "--bfcl-data", "{data}", "--release-test-set"], "has no questions for live_parallel"),
    (["suite.jsonl", "--bfcl-data", "{data}"], "agent: --bfcl-data goes with a bfcl: suite"),
])
def test_bad_bfcl_arguments_are_usage_errors(data, capsys, argv, message):
    assert message in error_line(capsys, *[a.replace("{data}", str(data)) for a in argv], "--list")


# --- the command against the scripted server ------------------------------------------------------------

def action(tool: str, **arguments) -> dict:
    return {"type": "tool_call", "tool": tool, "arguments": arguments}


def test_eval_of_the_five_categories_in_the_prompt_and_native_arms(server, data, workspace, capsys):
    # the arms take turns to go first: task 1 prompt then native, task 2 native then prompt, ...
    server.reply(json.dumps(action("math_factorial", number=5)))  # pass
    server.reply(tool_calls=[{"name": "math_factorial", "arguments": {"number": 5.0}}])  # a number, not an integer
    server.reply(tool_calls=[{"name": "weather_get", "arguments": {"city": "new york", "unit": "celsius", "days": 3}}])
    server.reply("{not json")  # prompt: re-asked, then right
    server.reply(json.dumps(action("weather_get", city="NYC", days=3, tags=["Rain", "wind"])))
    server.reply(json.dumps(action("square_area", side=4)))  # an integer is a number
    server.reply(tool_calls=[{"name": "circle_area", "arguments": {"radius": 4}}])  # the other function
    server.reply(tool_calls=[{"name": "spotify_play", "arguments": {"artist": "Taylor Swift", "duration": 20}}])
    server.reply(json.dumps([action("spotify_play", artist="Maroon 5", duration=15),  # any order
                             action("spotify_play", artist="Taylor Swift", duration=20)]))
    server.reply(json.dumps([action("convert_length", value=5, unit_from="kilometers", unit_to="mi"),
                             action("time_now", city="Tokyo")]))
    server.reply(tool_calls=[{"name": "time_now", "arguments": {"city": "tokyo"}},
                             {"name": "convert_length", "arguments": {"value": 5.0, "unit_from": "km", "unit_to": "miles"}}])
    server.reply("Leonardo da Vinci painted it.")  # native: no call
    server.reply(json.dumps(action("bmi_calculate", weight=70, height=1.8)))  # prompt: a call where none fits
    code = main(["eval", FIVE, "--bfcl-data", str(data), "--arm", "prompt", "--arm", "native", "--out", "results.json",
                 "--base-url", server.url, "--model", "m", "--workers", "1"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert err.splitlines()[0] == ("agent eval: 6 tasks (" + f"{data} (a folder)" + ") × 2 arms (prompt, native) × "
                                   "1 repeat = 12 runs, 1 worker")
    assert len(server.requests) == 13  # one reply a run, and the re-ask: nothing was run, nothing asked after
    table = cells(out)
    assert table["passed"] == ["5 (83.3%)", "3 (50.0%)"]
    assert table["mean steps"] == ["0.0", "0.0"] and table["re-asks"] == ["1", "0"]
    assert (table["simple_python"], table["multiple"], table["parallel"]) == (
        ["2/2 (100.0%)", "1/2 (50.0%)"], ["1/1 (100.0%)", "0/1 (0.0%)"], ["1/1 (100.0%)", "0/1 (0.0%)"])
    assert (table["parallel_multiple"], table["irrelevance"]) == (["1/1 (100.0%)", "1/1 (100.0%)"],
                                                                  ["0/1 (0.0%)", "1/1 (100.0%)"])
    assert table["failed bfcl_match"] == ["0", "3"] and table["failed no_call"] == ["1", "0"]
    native_tools = server.requests[1]["body"]["tools"]
    assert native_tools == tasks_of("simple_python", data)["simple_python_0"].tools
    assert "math_factorial" in server.requests[0]["body"]["messages"][0]["content"]

    results = json.loads((workspace / "results.json").read_text())
    assert results["suite"] == FIVE and results["source"] == f"{data} (a folder)"
    assert (results["settings"]["sample"], results["settings"]["seed"]) == (None, None)
    details = {(r["task"], r["protocol"]): r["checks"][0]["detail"] for r in results["runs"]}
    assert details["simple_python_0", "native"] == "math_factorial: number=5.0 is not of type integer"
    assert details["multiple_0", "native"] == "called circle_area, expected square_area"
    assert details["parallel_0", "native"] == "expected 2 calls, made 1"
    assert details["irrelevance_0", "prompt"] == "called: bmi_calculate"
    assert all(r["seconds"] > 0 and r["steps"] == 0 for r in results["runs"])
