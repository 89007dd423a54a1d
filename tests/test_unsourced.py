"""The second look at an answer whose figures come from nowhere: which figures, when, and what the run does."""
import pytest

from agent import Agent, ModelError, ScriptedModel, Settings
from agent.protocols import NativeProtocol, PromptProtocol
from agent.tools import Registry, builtin_registry, tool
from agent.tools.calculator import calculator
from agent.unsourced import SecondLook, unsourced
from tests.test_loop import final_reply, tool_reply

SALES = {"sales/jan.txt": "Total: 1200\n", "sales/feb.txt": "Total: 950\n", "sales/mar.txt": "Total: 1375\n"}


@pytest.mark.parametrize(("answer", "sources", "expected"), [
    ("The total is 3625.", "Total: 1200\nTotal: 950\nTotal: 1375", ["3625"]),
    ("The total is 3525.", "1200 + 950 + 1375 = 3525", []),
    ("It is 142.857.", "142.85714285714286", []),  # a rounding of a result
    ("It is 142.86.", "142.857", []),
    ("It is 142.9.", "142.857", []),
    ("It is 143.", "142.857", []),
    ("It is 144.", "142.857", ["144"]),
    ("The budget is 4,250 EUR.", "Budget: 4250", []),
    ("The budget is 4250 EUR.", "Budget: 4,250 EUR", []),
    ("Today is 2026-12-06.", "2026-12-06T21:46:00+01:00", []),
    ("Today is 2023-04-15.", "What is today's date in UTC?", ["2023", "15"]),  # "04" is a one-digit figure
    ("It took 3 steps and 0.5 s.", "", []),  # one-digit figures are not looked at
    ("10 20 30 40 50", "", ["10", "20", "30"]),  # at most three named
    ("7.5% of 2480 is 186, and 186 again", "7.5% of 2480", ["186"]),
])
def test_the_figures_no_source_gives(answer, sources, expected):
    assert unsourced(answer, sources) == expected


def test_a_huge_answer_against_huge_sources_is_read_once():
    answer = " ".join(str(n) for n in range(10, 100_010))
    sources = " ".join(str(n) for n in range(10, 200_010))
    assert unsourced(answer, sources) == []  # set lookups: comparing every pair would be 2e10 comparisons
    assert unsourced(answer + " 99999999", sources) == ["99999999"]
    many_kinds = " ".join(f"1.{'0' * n}1" for n in range(2000))  # 2,000 lengths of decimals: a few roundings
    assert unsourced(many_kinds, sources) == ["1.1", "1.01", "1.001"]


def messages(answer_sources: str = "") -> list[dict]:
    return [{"role": "system", "content": "Be brief. Your notes: the code is 4711."},
            {"role": "user", "content": "Add up the sales."},
            {"role": "user", "content": [{"type": "text", "text": answer_sources}]},
            {"role": "assistant", "content": "3625 is what I think"}]


def test_the_note_is_given_once_and_only_with_the_built_in_calculator():
    look = SecondLook(builtin_registry("."))
    assert look.note("The code is 4711 and the sum 1200.", messages("1200")) is None  # the system prompt counts
    note = look.note("The sum is 3625.", messages("1200, 950, 1375"))
    assert note["role"] == "user" and "3625 is not in the task or in any tool result" in note["content"]
    assert "calculator" in note["content"] and look.questioned == "The sum is 3625."
    assert look.note("The sum is 3625.", messages()) is None  # once in a run

    same_name = Registry([tool(lambda expression: "1", name="calculator", description="A scripted calculator.",
                               parameters={"type": "object", "properties": {"expression": {"type": "string"}}})])
    assert SecondLook(same_name).note("The sum is 3625.", messages()) is None
    assert SecondLook(Registry([calculator])).note("The sum is 3625.", messages()) is not None
    assert SecondLook(Registry([calculator]), shown=True).note("The sum is 3625.", messages()) is None


def sales_agent(protocol: str, replies, tmp_path, **settings) -> tuple[Agent, ScriptedModel, list]:
    for name, text in SALES.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    registry = builtin_registry(tmp_path)
    model, events = ScriptedModel(replies), []
    make = NativeProtocol if protocol == "native" else PromptProtocol
    agent = Agent(model, registry, make(registry), Settings(**settings),
                  emit=lambda event, **data: events.append((event, data)))
    return agent, model, events


READS = [("read_file", {"path": name}) for name in SALES]


@pytest.mark.parametrize("protocol", ["prompt", "native"])
def test_an_answer_worked_out_in_the_head_is_computed_again(protocol, tmp_path):
    agent, model, events = sales_agent(protocol, [
        tool_reply(protocol, *READS),
        final_reply(protocol, "The total is 3625."),
        tool_reply(protocol, ("calculator", {"expression": "1200 + 950 + 1375"})),
        final_reply(protocol, "The total is 3525."),
    ], tmp_path)
    result = agent.run("What are the total sales?")
    assert (result.status, result.answer, result.steps, result.model_calls) == ("final", "The total is 3525.", 2, 4)
    note = model.calls[2]["messages"][-1]
    assert note == {"role": "user", "content": "note: 3625 is not in the task or in any tool result. "
                    "Compute it with calculator from the numbers the results give, then answer.\n"}
    assert [e for e, _ in events].count("second_look") == 1 and ("final", {"answer": "The total is 3525."}) in events
    assert result.reasks == 0 and result.errors == {}  # a second look is no malformed reply


def test_an_answer_that_stands_again_is_the_answer(tmp_path):
    agent, model, _ = sales_agent("prompt", [tool_reply("prompt", *READS), final_reply("prompt", "3625"),
                                             final_reply("prompt", "3625, I am sure.")], tmp_path)
    result = agent.run("What are the total sales?")
    assert (result.status, result.answer, result.model_calls) == ("final", "3625, I am sure.", 3)


@pytest.mark.parametrize("failure", [ModelError("the endpoint went away"), "not json at all"])
def test_a_run_that_fails_after_the_note_keeps_the_answer_it_had(failure, tmp_path):
    agent, model, events = sales_agent("prompt", [
        tool_reply("prompt", *READS), final_reply("prompt", "The total is 3625."), *[failure] * 4], tmp_path)
    result = agent.run("What are the total sales?")
    assert (result.status, result.answer, result.error) == ("final", "The total is 3625.", None)
    assert events[-1][0] == "run_end" and events[-1][1]["status"] == "final"


def test_no_second_look_when_no_tool_step_is_left(tmp_path):
    agent, model, events = sales_agent("prompt", [tool_reply("prompt", *READS), final_reply("prompt", "3625")],
                                       tmp_path, max_steps=1)
    result = agent.run("What are the total sales?")
    assert (result.status, result.answer, result.model_calls) == ("final", "3625", 2)
    assert "second_look" not in [e for e, _ in events]


@pytest.mark.parametrize("stream", ["--no-stream", "--stream"])
def test_the_command_shows_the_second_look_and_prints_one_answer(stream, server, workspace, capsys):
    from agent.cli import main
    from tests.support import action

    for name, text in SALES.items():
        (workspace / name).parent.mkdir(exist_ok=True)
        (workspace / name).write_text(text)
    server.reply(f"[{', '.join(action('read_file', path=name) for name in SALES)}]")
    server.reply(action(answer="The total is 3625."))
    server.reply(action("calculator", expression="1200 + 950 + 1375"))
    server.reply(action(answer="The total is 3525."))
    code = main(["--base-url", server.url, "--model", "m", "--timeout", "5", stream, "What are the total sales?"])
    out, err = capsys.readouterr()
    if stream == "--stream":  # the answer was shown as it came: it is not taken back
        assert (code, out, len(server.requests)) == (0, "The total is 3625.\n", 2)
        assert "second look" not in err
    else:
        assert (code, out, len(server.requests)) == (0, "The total is 3525.\n", 4)
        assert "second look: note: 3625 is not in the task or in any tool result." in err
        assert "calculator(expression=1200 + 950 + 1375) → 3525" in err


def test_an_evaluation_run_records_the_second_look_and_the_report_shows_it():
    from agent.evaluation.html_report import _run
    from agent.evaluation.runner import run_task
    from agent.evaluation.suites import make_task

    task = make_task({"id": "sales", "task": "What are the total sales?", "files": SALES,
                      "checks": {"answer_number": 3525, "tools_called": ["calculator"]}})
    model = ScriptedModel([tool_reply("prompt", *READS), final_reply("prompt", "The total is 3625."),
                           tool_reply("prompt", ("calculator", {"expression": "1200 + 950 + 1375"})),
                           final_reply("prompt", "The total is 3525.")])
    record = run_task(task, PromptProtocol, model, Settings(), "prompt-constrained")
    assert record["passed"] and record["answer"] == "The total is 3525."
    assert [e["event"] for e in record["transcript"]] == ["reply", "tool", "tool", "tool", "reply", "second_look",
                                                          "reply", "tool", "reply", "final"]
    assert "<b>second look</b>\nnote: 3625 is not in the task" in _run(record)


def test_the_run_log_describes_a_second_look():
    from agent.cli.logs import describe

    event = {"event": "second_look", "time": "t", "answer": "3625", "note": "note: 3625 is not in the task."}
    assert describe(event) == ("second look at the answer", "note: 3625 is not in the task.")


def test_a_messages_texts_are_its_string_or_its_text_parts():
    from agent.text import text_parts

    assert text_parts("1200") == ["1200"]
    assert text_parts([{"type": "text", "text": "950"}, {"type": "image_url", "image_url": {}}, "x", {"text": 7},
                       {"type": "text", "text": "1375"}]) == ["950", "1375"]
    assert text_parts(None) == [] and text_parts(3625) == [] and text_parts({"text": "1"}) == []
