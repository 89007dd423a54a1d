"""The loop's behaviour, driven by a scripted in-process model in both protocols."""
import json
import re
import threading

import pytest

from agent import Agent, ModelError, Reply, ScriptedModel, Settings
from agent.compaction import is_result
from agent.protocols import NativeProtocol, PromptProtocol
from agent.tools import Registry, builtin_registry
from agent.trace import Trace, ignore

PROTOCOLS = ["prompt", "native"]


def tool_reply(protocol: str, *calls: tuple[str, dict]) -> Reply:
    """A reply asking for the given (tool, arguments) calls, in the protocol's own format."""
    if protocol == "native":
        return Reply(tool_calls=[
            {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            for i, (name, args) in enumerate(calls)], finish_reason="tool_calls")
    actions = [{"type": "tool_call", "tool": name, "arguments": args} for name, args in calls]
    return Reply(content=json.dumps(actions[0] if len(actions) == 1 else actions))


def final_reply(protocol: str, answer: str) -> Reply:
    if protocol == "native":
        return Reply(content=answer)
    return Reply(content=json.dumps({"type": "final", "answer": answer}))


def make_agent(protocol: str, replies, registry=None, emit=ignore, **settings) -> tuple[Agent, ScriptedModel]:
    registry = registry or builtin_registry(".")
    model = ScriptedModel(replies)
    proto = NativeProtocol(registry) if protocol == "native" else PromptProtocol(registry)
    return Agent(model, registry, proto, Settings(**settings), emit=emit), model


def result_texts(messages: list[dict]) -> list[str]:
    return [m["content"] for m in messages if m["role"] in ("tool", "user")][1:]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_calculator_seed_task(protocol):
    agent, model = make_agent(protocol, [
        tool_reply(protocol, ("calculator", {"expression": "128*96 + 45**2 - 88/2"})),
        final_reply(protocol, "14269"),
    ])
    result = agent.run("Compute 128*96 + 45**2 - 88/2")
    assert (result.status, result.answer, result.steps, result.model_calls) == ("final", "14269", 1, 2)
    assert "14269" in result_texts(model.calls[1]["messages"])[0]
    assert result.tool_calls == [{"tool": "calculator", "arguments": {"expression": "128*96 + 45**2 - 88/2"},
                                  "ok": True}]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_question_that_needs_no_tool(protocol):
    agent, model = make_agent(protocol, [final_reply(protocol, "Paris")])
    result = agent.run("What is the capital of France?")
    assert (result.status, result.answer, result.steps, result.model_calls) == ("final", "Paris", 0, 1)


def test_prompt_mode_sends_no_tools_and_describes_the_protocol():
    agent, model = make_agent("prompt", [final_reply("prompt", "ok")])
    agent.run("hi")
    assert model.calls[0]["options"] == {}
    system = model.calls[0]["messages"][0]["content"]
    assert '"type": "tool_call"' in system and '"type": "final"' in system and "calculator" in system


def test_native_mode_sends_the_registry_as_tools():
    agent, model = make_agent("native", [final_reply("native", "ok")])
    agent.run("hi")
    names = [t["function"]["name"] for t in model.calls[0]["options"]["tools"]]
    assert names == ["calculator", "read_file", "write_file", "list_dir", "current_time"]


def test_malformed_reply_is_reasked_then_dropped_from_history():
    agent, model = make_agent("prompt", [
        '{"type": "final", "answer": "Paris" "Paris"}',  # two strings
        final_reply("prompt", "Paris"),
    ])
    result = agent.run("What is the capital of France?")
    assert (result.status, result.reasks, result.errors) == ("final", 1, {"invalid_json": 1})
    reask = model.calls[1]["messages"][-1]
    assert reask["role"] == "user" and "invalid_json" in reask["content"] and '"type": "final"' in reask["content"]
    assert [m["role"] for m in result.messages] == ["system", "user", "assistant"]
    assert '"Paris"' in result.messages[-1]["content"]


def test_failed_attempt_leaves_the_history_once_a_valid_reply_arrives():
    agent, model = make_agent("prompt", [
        "I will use the calculator.",
        tool_reply("prompt", ("calculator", {"expression": "2+2"})),
        final_reply("prompt", "4"),
    ])
    result = agent.run("2+2?")
    sent = model.calls[2]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert "I will use" not in json.dumps(sent)
    assert result.errors == {"no_json": 1}


def test_reask_budget_ends_the_run_with_format_errors():
    agent, model = make_agent("prompt", ["no json"] * 4 + [final_reply("prompt", "late")], max_reasks=3)
    result = agent.run("anything")
    assert (result.status, result.model_calls, result.reasks) == ("format_errors", 4, 3)
    assert "no_json" in result.error and result.answer is None


def test_reasks_are_not_steps():
    agent, _ = make_agent("prompt", [
        "oops", tool_reply("prompt", ("calculator", {"expression": "1+1"})), "oops again",
        final_reply("prompt", "2"),
    ], max_steps=1)
    result = agent.run("1+1")
    assert (result.status, result.steps, result.reasks) == ("final", 1, 2)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_step_limit(protocol):
    replies = [tool_reply(protocol, ("calculator", {"expression": f"{i}+1"})) for i in range(5)]
    agent, model = make_agent(protocol, replies, max_steps=2)
    result = agent.run("count")
    assert (result.status, result.steps, result.model_calls) == ("step_limit", 2, 3)
    assert "last tool step" in result_texts(model.calls[2]["messages"])[-1]
    assert len(result.tool_calls) == 2


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_repeated_call_is_not_rerun_and_a_third_ends_the_run(protocol):
    registry = Registry()
    runs = []

    @registry.tool(parameters={"type": "object", "properties": {}, "additionalProperties": False})
    def fetch():
        """Fetch a number."""
        runs.append(1)
        return "42"

    same = tool_reply(protocol, ("fetch", {}))
    agent, model = make_agent(protocol, [same, same, same], registry=registry)
    result = agent.run("fetch it")
    assert len(runs) == 1
    note = result_texts(model.calls[2]["messages"])[-1]
    assert "already called fetch" in note and "42" in note
    assert (result.status, result.steps) == ("loop", 3)


def test_tool_output_is_truncated_with_a_note():
    registry = Registry()

    @registry.tool(parameters={"type": "object", "properties": {}, "additionalProperties": False})
    def dump():
        """Return a lot."""
        return "A" * 6000 + "END"

    agent, model = make_agent("prompt", [tool_reply("prompt", ("dump", {})), final_reply("prompt", "done")],
                              registry=registry, max_output_chars=1000)
    agent.run("dump")
    text = result_texts(model.calls[1]["messages"])[0]
    assert "characters cut" in text and text.rstrip().endswith("END") and len(text) < 1200


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_several_calls_run_concurrently_and_answer_in_order(protocol):
    registry = Registry()
    barrier = threading.Barrier(2, timeout=5)

    @registry.tool(parameters={"type": "object", "properties": {"name": {"type": "string"}},
                               "required": ["name"], "additionalProperties": False})
    def meet(name):
        """Wait for the other call, then greet."""
        barrier.wait()  # raises BrokenBarrierError unless both calls run at the same time
        return f"hello {name}"

    agent, model = make_agent(protocol, [
        tool_reply(protocol, ("meet", {"name": "ann"}), ("meet", {"name": "bob"})),
        final_reply(protocol, "done"),
    ], registry=registry)
    result = agent.run("greet both")
    assert result.status == "final" and [c["ok"] for c in result.tool_calls] == [True, True]
    texts = "\n".join(result_texts(model.calls[1]["messages"]))
    assert texts.index("hello ann") < texts.index("hello bob")


def test_model_error_ends_the_run():
    agent, _ = make_agent("prompt", [ModelError("endpoint down")])
    result = agent.run("x")
    assert (result.status, result.error) == ("model_error", "endpoint down")


def test_tool_error_goes_back_to_the_model(tmp_path):
    (tmp_path / "notes.md").write_text("x")
    agent, model = make_agent("prompt", [
        tool_reply("prompt", ("read_file", {"path": "notes.txt"})),
        final_reply("prompt", "There is no notes.txt."),
    ], registry=builtin_registry(tmp_path))
    result = agent.run("read notes.txt")
    text = result_texts(model.calls[1]["messages"])[0]
    assert "error: file not found: notes.txt; the workspace has: notes.md" in text
    assert result.tool_calls[0]["ok"] is False and result.status == "final"


def test_native_malformed_arguments_are_answered_per_call():
    bad = {"id": "call_a", "type": "function", "function": {"name": "calculator", "arguments": "{expression: 1+1"}}
    good = {"id": "call_b", "type": "function", "function": {"name": "calculator",
                                                              "arguments": '{"expression": "2+3"}'}}
    agent, model = make_agent("native", [Reply(tool_calls=[bad, good]), final_reply("native", "5")])
    result = agent.run("add")
    tool_messages = [m for m in model.calls[1]["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["call_a", "call_b"]
    assert tool_messages[0]["content"].startswith("error:") and tool_messages[1]["content"] == "5"
    assert (result.steps, result.errors, result.reasks) == (1, {"invalid_json": 1}, 0)


def test_native_reply_with_only_bad_calls_is_a_reask():
    unknown = {"id": "call_x", "type": "function", "function": {"name": "websearch", "arguments": "{}"}}
    agent, model = make_agent("native", [Reply(tool_calls=[unknown]), final_reply("native", "sorry")])
    result = agent.run("search")
    sent = model.calls[1]["messages"]
    assert sent[-1]["role"] == "tool" and "calculator" in sent[-1]["content"]  # lists the real tools
    assert (result.status, result.steps, result.reasks, result.errors) == ("final", 0, 1, {"unknown_tool": 1})
    assert [m["role"] for m in result.messages] == ["system", "user", "assistant"]


def test_interrupt_ends_the_run_and_the_trace(tmp_path):
    registry = Registry()

    @registry.tool(parameters={"type": "object", "properties": {}, "additionalProperties": False})
    def stop():
        """Simulate Ctrl-C."""
        raise KeyboardInterrupt

    path = tmp_path / "trace.jsonl"
    with Trace(path) as trace:
        agent, _ = make_agent("prompt", [tool_reply("prompt", ("stop", {}))], registry=registry, emit=trace)
        result = agent.run("stop")
    events = [json.loads(line) for line in path.read_text().splitlines()]
    assert result.status == "interrupted"
    assert [e["event"] for e in events] == ["run_start", "model_call", "tool_call", "run_end"]
    assert events[-1]["status"] == "interrupted"


def test_trace_records_every_event(tmp_path):
    path = tmp_path / "trace.jsonl"
    with Trace(path) as trace:
        agent, _ = make_agent("prompt", [
            "not json", tool_reply("prompt", ("calculator", {"expression": "6*7"})), final_reply("prompt", "42"),
        ], emit=trace)
        agent.run("6*7")
    events = [json.loads(line) for line in path.read_text().splitlines()]
    assert [e["event"] for e in events] == [
        "run_start", "model_call", "parse_error", "model_call", "tool_call", "tool_result",
        "model_call", "final", "run_end"]
    assert events[1]["content"] == "not json" and events[2]["kind"] == "no_json"
    assert events[5]["result"] == "42" and events[-1]["status"] == "final" and events[-1]["model_calls"] == 3


def test_the_parsers_repairs_are_recorded_in_the_trace():
    events = []
    agent, _ = make_agent("prompt", ["{'type': 'final', 'answer': 'ok', }"],
                          emit=lambda event, **data: events.append((event, data)))
    assert agent.run("say ok").answer == "ok"
    assert [e for e in events if e[0] == "repaired"] == [("repaired", {"repairs": ["single_quotes", "trailing_commas"]})]
    assert [e[0] for e in events] == ["run_start", "model_call", "repaired", "final", "run_end"]


def test_native_calls_without_ids_get_ids_that_pair_with_their_results():
    call = {"type": "function", "function": {"name": "calculator", "arguments": '{"expression": "1+1"}'}}
    agent, model = make_agent("native", [Reply(tool_calls=[call, call]), final_reply("native", "2")])
    agent.run("1+1 twice")
    sent = model.calls[1]["messages"]
    assert [c["id"] for c in sent[2]["tool_calls"]] == ["call_1", "call_2"]
    assert [m["tool_call_id"] for m in sent[3:]] == ["call_1", "call_2"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_oldest_tool_results_are_dropped_when_the_history_outgrows_its_limit(protocol):
    registry = Registry()

    @registry.tool(parameters={"type": "object", "properties": {"n": {"type": "integer"}},
                               "required": ["n"], "additionalProperties": False})
    def page(n):
        """Return a long page."""
        return f"page {n}: " + "x" * 3000

    replies = [tool_reply(protocol, ("page", {"n": n})) for n in range(4)] + [final_reply(protocol, "done")]
    system = make_agent(protocol, [], registry=registry)[0].protocol.system_prompt()
    limit = len(system) + 7000  # room for the task and two pages, not three
    events = []
    agent, model = make_agent(protocol, replies, registry=registry, max_history_chars=limit,
                              emit=lambda event, **data: events.append(event))
    result = agent.run("read all pages " + "please " * 20)
    sent = model.calls[-1]["messages"]
    results = [m["content"] for m in sent if m["role"] in ("tool", "user")][1:]
    assert result.status == "final"
    assert sent[0]["content"] == model.calls[0]["messages"][0]["content"]  # the system prompt is whole
    assert sent[1]["content"] == "read all pages " + "please " * 20
    assert "page 3: xxx" in results[-1] and "page 2: xxx" in results[-2]
    assert re.fullmatch(r"\[an earlier tool result of 30\d\d characters was dropped.*\]\s*", results[0])
    assert sum(len(m["content"] or "") for m in sent) <= limit
    assert events.count("compacted") == 2


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_latest_result_of_a_keep_latest_tool_survives_compaction(protocol):
    registry = Registry()

    @registry.tool(keep_latest=True)
    def plan(version: int) -> str:
        """Write the plan."""
        return f"plan v{version}: " + "p" * 1000

    @registry.tool
    def page(n: int) -> str:
        """Return a long page."""
        return f"page {n}: " + "x" * 3000

    replies = [tool_reply(protocol, ("plan", {"version": 1})), tool_reply(protocol, ("page", {"n": 1})),
               tool_reply(protocol, ("plan", {"version": 2})), tool_reply(protocol, ("page", {"n": 2})),
               tool_reply(protocol, ("page", {"n": 3})), tool_reply(protocol, ("page", {"n": 4})),
               final_reply(protocol, "done")]
    agent, model = make_agent(protocol, replies, registry=registry, max_history_chars=6000)
    assert agent.run("work through the pages").status == "final"
    results = result_texts(model.calls[-1]["messages"])
    shown = ["dropped" if "was dropped" in text else re.search(r"plan v\d|page \d", text).group() for text in results]
    assert shown == ["dropped", "dropped", "plan v2", "dropped", "dropped", "page 4"]  # plan v1, page 1, ...


def test_context_is_read_at_the_start_of_each_run_into_the_system_prompt():
    notes = iter(["first notes", "second notes"])
    agent, model = make_agent("prompt", [final_reply("prompt", "a"), final_reply("prompt", "b")])
    agent.context = lambda: next(notes)
    agent.run("one")
    agent.run("two")
    assert [call["messages"][0]["content"].endswith(f"\n{text}\n") for call, text in
            zip(model.calls, ["first notes", "second notes"])] == [True, True]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_run_continues_an_earlier_conversation_under_its_own_system_prompt(protocol):
    agent, model = make_agent(protocol, [
        tool_reply(protocol, ("calculator", {"expression": "6*7"})), final_reply(protocol, "42"),
        final_reply(protocol, "It was 6*7."),
    ])
    first = agent.run("What is 6*7?")
    agent.instructions = "Be brief."
    second = agent.run("How did you get it?", history=first.messages)
    assert (second.status, second.answer, second.steps) == ("final", "It was 6*7.", 0)
    sent = model.calls[-1]["messages"]
    assert sent[1:] == first.messages[1:] + [{"role": "user", "content": "How did you get it?"}]
    assert sent[0]["content"].endswith("Be brief.\n") and second.messages == sent + [second.messages[-1]]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_compaction_drops_earlier_turns_tool_results_but_never_their_tasks(protocol):
    registry = Registry()

    @registry.tool
    def page(n: int) -> str:
        """Return a long page."""
        return f"page {n}: " + "x" * 3000

    long_task = "read the page " + "carefully " * 40
    agent, model = make_agent(protocol, [
        tool_reply(protocol, ("page", {"n": 1})), final_reply(protocol, "one"),
        tool_reply(protocol, ("page", {"n": 2})), tool_reply(protocol, ("page", {"n": 3})),
        final_reply(protocol, "two"),
    ], registry=registry, max_history_chars=7000)
    first = agent.run(long_task)
    second = agent.run(long_task + "again", history=first.messages)
    assert second.status == "final"
    sent = model.calls[-1]["messages"]
    users = [m["content"] for m in sent if m["role"] == "user"]
    assert users[0] == long_task and long_task + "again" in users
    results = [m["content"] for i, m in enumerate(sent) if is_result(sent, i)]
    assert len(results) == 3 and "was dropped" in results[0] and "page 3: xxx" in results[-1]
    assert not any(is_result(sent, sent.index(m)) for m in sent if m["content"] in (long_task, long_task + "again"))
