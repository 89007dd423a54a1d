"""spawn_agent: a helper agent with its own history and steps, the parent's tools but spawn_agent, the same model;
only its answer (or its failure) comes back, its events are nested in the parent's trace, its tokens counted."""
import json

import pytest

from agent import Agent, Reply, ScriptedModel, Settings
from agent.cli import main
from agent.protocols import NativeProtocol, PromptProtocol
from agent.subagents import SubAgents
from agent.tools import Plan, Registry, builtin_registry
from tests.support import action


def helper_setup(replies, protocol="prompt", **settings):
    events = []

    def emit(event, **data):
        events.append((event, data))

    plan = Plan()
    make = NativeProtocol if protocol == "native" else PromptProtocol
    model = ScriptedModel([Reply(content=r, usage={"prompt_tokens": 10, "completion_tokens": 1})
                           if isinstance(r, str) else r for r in replies])
    tools = [*builtin_registry("."), plan.tool]
    subagents = SubAgents(model, tools, make, Settings(**settings), emit=emit)
    registry = Registry([*tools, subagents.tool])
    agent = Agent(model, registry, make(registry), Settings(**settings), emit=emit)
    return agent, model, events, plan


def test_a_helper_runs_with_its_own_history_and_only_its_answer_comes_back():
    agent, model, events, _ = helper_setup([
        action("spawn_agent", task="Compute 6*7 with the calculator."),
        action("calculator", expression="6*7"),  # the helper's
        action(answer="6*7 is 42."),  # the helper's answer
        action(answer="The helper found 42."),
    ])
    result = agent.run("Ask a helper for 6*7.")
    assert (result.status, result.answer, result.steps) == ("final", "The helper found 42.", 1)
    helper_first = model.calls[1]["messages"]
    assert helper_first[1] == {"role": "user", "content": "Compute 6*7 with the calculator."} and len(helper_first) == 2
    assert "spawn_agent" not in helper_first[0]["content"] and "calculator" in helper_first[0]["content"]
    assert "spawn_agent" in model.calls[0]["messages"][0]["content"]
    parent_last = model.calls[3]["messages"]
    assert "6*7 is 42." in parent_last[-1]["content"] and "calculator" not in parent_last[-1]["content"]
    assert (result.model_calls, result.prompt_tokens, result.completion_tokens) == (4, 40, 4)  # the helper's too
    names = [e if e != "subagent" else f"subagent:{d['inner']['event']}" for e, d in events]
    start, end = names.index("tool_call"), names.index("tool_result")
    assert names[start + 1:end] == ["subagent:run_start", "subagent:model_call", "subagent:tool_call",
                                    "subagent:tool_result", "subagent:model_call", "subagent:final",
                                    "subagent:run_end"]
    assert all(d["agent"] == 1 for e, d in events if e == "subagent")


def test_a_helper_that_fails_is_an_error_result_and_the_parent_goes_on():
    agent, model, events, _ = helper_setup([
        action("spawn_agent", task="Count forever."),
        action("calculator", expression="1+1"), action("calculator", expression="2+1"),  # the helper's two steps
        action("calculator", expression="3+1"),  # a third: past its budget
        action(answer="I did it myself: 4."),
    ], max_steps=2)
    result = agent.run("Count.")
    assert (result.status, result.answer) == ("final", "I did it myself: 4.")
    told = model.calls[-1]["messages"][-1]["content"]
    assert "error: the helper ended without an answer (step_limit: no final answer within 2 tool steps" in told
    assert result.tool_calls[0] == {"tool": "spawn_agent", "arguments": {"task": "Count forever."}, "ok": False}


def test_a_helper_has_a_plan_of_its_own():
    todos = [{"content": "helper step", "status": "in_progress"}]
    agent, model, events, plan = helper_setup([
        action("spawn_agent", task="Plan and answer."), action("todo_write", todos=todos),
        action(answer="planned"), action(answer="done"),
    ])
    assert agent.run("Go.").status == "final"
    assert plan.todos == []  # the parent's plan is not the helper's


def test_ctrl_c_in_a_helper_stops_the_whole_run():
    agent, model, events, _ = helper_setup([action("spawn_agent", task="x"), KeyboardInterrupt()])
    result = agent.run("Go.")
    assert result.status == "interrupted"


def test_spawn_agent_is_offered_only_when_named(server, workspace, capsys):
    assert main(["tools"]) == 0
    out = capsys.readouterr().out
    assert "off: " in out and "spawn_agent (not in --tools)" in out
    assert main(["tools", "--tools", "spawn_agent,calculator"]) == 0
    assert "spawn_agent(task: string)" in capsys.readouterr().out


@pytest.mark.parametrize("protocol", ["prompt", "native"])
def test_a_helper_through_the_command_line_is_traced_under_its_call(server, workspace, capsys, protocol):
    if protocol == "native":
        server.reply(tool_calls=[{"name": "spawn_agent", "arguments": {"task": "What is 6*7? Use the calculator."}}])
        server.reply(tool_calls=[{"name": "calculator", "arguments": {"expression": "6*7"}}])
        server.reply("6*7 is 42.")
        server.reply("The helper says 42.")
    else:
        server.reply(action("spawn_agent", task="What is 6*7? Use the calculator."))
        server.reply(action("calculator", expression="6*7"))
        server.reply(action(answer="6*7 is 42."))
        server.reply(action(answer="The helper says 42."))
    trace = workspace / "trace.jsonl"
    code = main(["--base-url", server.url, "-m", "m", "--protocol", protocol, "--tools", "spawn_agent,calculator",
                 "--stream", "--trace", str(trace), "Have a helper compute 6*7."])
    out, err = capsys.readouterr()
    assert (code, out) == (0, "The helper says 42.\n")  # streamed: the helper's answer is not shown
    assert "↳ [1] calculator(expression=6*7) → 42" in err and "spawn_agent(task=What is 6*7?" in err
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    nested = [e for e in events if e["event"] == "subagent"]
    assert [e["inner"]["event"] for e in nested][0] == "run_start" and nested[-1]["inner"]["status"] == "final"
    helper_tools = server.requests[1]["body"].get("tools") or []
    assert [t["function"]["name"] for t in helper_tools] == (["calculator"] if protocol == "native" else [])
    run_end = events[-1]
    assert run_end["model_calls"] == 4 and run_end["prompt_tokens"] == sum(
        e["usage"]["prompt_tokens"] for e in events if e["event"] == "model_call") + sum(
        e["inner"]["usage"]["prompt_tokens"] for e in nested if e["inner"]["event"] == "model_call")
