"""--stream: the answer shown as the model writes it, and everything else (the parsed reply, re-asks, the trace)
exactly as without it."""
import json
import time

import pytest
from hypothesis import given, settings, strategies as st

from agent.cli import main
from agent.models import ModelError, Reply, ScriptedModel
from agent.models.openai_compatible import OpenAIModel
from agent.parsing import action_schema, parse_action
from agent.streaming import ContentReader, FinalAnswerReader, Streamed
from tests.support import action

HELLO = [{"role": "user", "content": "hi"}]
SSE = {"Content-Type": "text/event-stream"}


def read(reader, text: str, size: int) -> str:
    return "".join(reader.feed(text[at:at + size]) for at in range(0, len(text), size))


@pytest.mark.parametrize("reply, shown", [
    ('{"type": "final", "answer": "Hi, \\"you\\" \\u00e9 \\ud83d\\ude00\\n"}', 'Hi, "you" é 😀\n'),
    ('{"answer": "written before its type", "type": "final"}', "written before its type"),
    ('{"thought": "a {brace} and [1, 2]", "type": "final", "answer": "ok", "n": [1, {"a": null}]}', "ok"),
    ('<think>maybe {"type": "final", "answer": "no"}</think>\n```json\n{"type": "final", "answer": "yes"}\n```', "yes"),
    ('Here {it} is: {"type": "final", "answer": "after the prose"}', "after the prose"),
    ('{"type": "final", "answer": "a lone \\ud800 half"}', "a lone \ufffd half"),
    ('{"type": "tool_call", "tool": "calculator", "arguments": {"expression": "1+1", "answer": "x"}}', ""),
    ('[{"type": "tool_call", "tool": "calculator", "arguments": {}}]', ""),
    ("{'type': 'final', 'answer': 'single quotes: the parser repairs them, the reader shows nothing'}", ""),
])
@pytest.mark.parametrize("size", [1, 3, 1000])
def test_the_prompt_reader_shows_the_answer_of_a_final_action_only(reply, shown, size):
    assert read(FinalAnswerReader(), reply, size) == shown


ACTIONS = action_schema({"calculator": {"type": "object", "properties": {"expression": {"type": "string"}}}})


@settings(max_examples=200, deadline=None)
@given(answer=st.text(), answer_first=st.booleans(), ascii=st.booleans(),
       cuts=st.lists(st.integers(min_value=1, max_value=7), min_size=1))
def test_the_prompt_reader_shows_exactly_what_the_parser_reads(answer, answer_first, ascii, cuts):
    value = {"answer": answer, "type": "final"} if answer_first else {"type": "final", "answer": answer}
    text = json.dumps(value, ensure_ascii=ascii)
    reader, shown, at, index = FinalAnswerReader(), "", 0, 0
    while at < len(text):
        size = cuts[index % len(cuts)]
        shown, at, index = shown + reader.feed(text[at:at + size]), at + size, index + 1
    assert shown == parse_action(text, ACTIONS).value["answer"]


@pytest.mark.parametrize("content, shown", [
    ("  Paris is the capital.", "  Paris is the capital."),
    ('  {"name": "calculator", "arguments": {}}', ""),
    ("<tool_call>{}</tool_call>", ""),
    ("```json\n{}\n```", ""),
])
def test_the_native_reader_shows_text_unless_it_begins_like_a_written_call(content, shown):
    assert read(ContentReader(), content, 2) == shown


class Display:
    def __init__(self):
        self.events = []

    def start(self):
        self.events.append("start")

    def show(self, text):
        if text:
            self.events.append(text)

    def end(self):
        self.events.append("end")


def test_streamed_wraps_a_model_and_returns_its_very_reply():
    reply = Reply(content=action(answer="forty-two"), usage={"prompt_tokens": 1, "completion_tokens": 2})
    display = Display()
    assert Streamed(ScriptedModel([reply]), FinalAnswerReader, display).complete(HELLO) is reply
    assert display.events[0] == "start" and display.events[-1] == "end"
    assert "".join(display.events[1:-1]) == "forty-two" and len(display.events) > 4


def model(server, **settings):
    return OpenAIModel("m", base_url=server.url, **{"timeout": 5.0, "max_retries": 0, **settings})


def test_a_streamed_reply_is_the_reply_complete_gives_in_both_shapes(server):
    calls = [{"name": "calculator", "arguments": {"expression": "6*7"}}, {"name": "list_dir", "arguments": {}}]
    for stream in (False, True):
        server.reply(action(answer="héllo 😀"))
        server.reply("Let me see.", tool_calls=[dict(c, id=f"id_{i}") for i, c in enumerate(calls)])
    whole = [model(server).complete(HELLO) for _ in range(2)]
    pieces = []
    streamed = [model(server).stream(HELLO, pieces.append) for _ in range(2)]
    assert streamed == whole and whole[1].tool_calls[1]["id"] == "id_1"
    assert "".join(pieces) == action(answer="héllo 😀") + "Let me see." and len(pieces) > 10
    assert server.requests[2]["body"]["stream"] is True
    assert server.requests[2]["body"]["stream_options"] == {"include_usage": True}


def test_the_text_arrives_while_the_reply_is_still_being_sent(server):
    server.reply(action(answer="one two three four five six seven"), pause=0.05)
    seen = []
    started = time.monotonic()
    model(server).stream(HELLO, lambda text: seen.append(time.monotonic() - started))
    assert seen[-1] - seen[0] > 0.3  # 15 chunks, 0.05s apart: shown as they came, not at the end


def test_a_server_that_answers_a_stream_request_whole_is_read_whole(server):
    server.respond(200, {"choices": [{"message": {"content": "whole"}, "finish_reason": "stop"}]})
    pieces = []
    assert model(server).stream(HELLO, pieces.append).content == "whole" and pieces == []


@pytest.mark.parametrize("body, expected", [
    ('data: {"error": {"message": "overloaded"}}\n\n', "endpoint answered with an error: overloaded"),
    ("data: not json\n\n", "an event of the stream is not JSON (not json)"),
    ('data: {"choices": [{"delta": {"content": 7}}]}\n\n', "in a chunk of the stream, choices[0].delta.content is a number"),
    ('data: {"choices": [{"delta": {"content": "7"}}]}\n\ndata: {"choices": [{"delta": {"content": 7}}]}\n\n',
     "in a chunk of the stream, choices[0].delta.content is a number"),  # after a valid chunk of another shape
    ('data: {"usage": {"prompt_tokens": 7}}\n\ndata: {"usage": {"prompt_tokens": -7}}\n\n',
     "in a chunk of the stream, usage.prompt_tokens: -7 is less than the minimum of 0"),  # a count of another sign
    ('data: {"choices": [{"delta": {"content": "cut"}}]}\n\n', "the stream from"),
    (": keep-alive\n\ndata: [DONE]\n\n", "the stream held no choice"),
])
def test_a_broken_stream_is_one_line_that_says_what_is_wrong(server, body, expected):
    server.respond(200, body, headers=SSE)
    with pytest.raises(ModelError) as caught:
        model(server).stream(HELLO, lambda text: None)
    assert expected in str(caught.value) and "\n" not in str(caught.value)


def test_chunks_of_one_shape_are_read_alike_however_deeply_they_nest(server):
    """A chunk's shape is checked once (the shapes found valid are kept); one nested past what the shape can be made
    of (a field no schema reads, 700 objects deep) is checked on its own, and read like any other."""
    deep = '{"a": ' * 700 + "1" + "}" * 700
    chunks = [{"choices": [{"index": 0, "delta": {"content": text}}]} for text in ("one", "two")]
    body = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + \
        'data: {"choices": [{"index": 0, "delta": {"content": " three", "x": ' + deep + '}, "finish_reason": "stop"}]}' \
        "\n\ndata: [DONE]\n\n"
    for _ in range(2):
        server.respond(200, body, headers=SSE)
        pieces: list = []
        assert model(server).stream(HELLO, pieces.append).content == "onetwo three" == "".join(pieces)


def test_an_upstream_that_sends_on_after_done_is_let_go_and_its_answer_stands(server):
    """What follows [DONE] is read, to keep the connection, but not for long, and it cannot undo the answer."""
    answer = 'data: {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}\n\n'
    server.endless(answer + "data: [DONE]\n\n", interval=0.02, headers=SSE)
    started = time.monotonic()
    assert model(server, timeout=3).stream(HELLO, lambda text: None).content == "hi"
    assert time.monotonic() - started < 1


def test_a_stream_keeps_the_deadline_and_the_size_cap(server):
    server.endless(": keep-alive\n\n", interval=0.05, headers=SSE)
    with pytest.raises(ModelError, match="no complete answer from .* within 0.5s"):
        model(server, timeout=0.5).stream(HELLO, lambda text: None)
    server.endless('data: {"choices": [{"delta": {"content": "' + "x" * 65000 + '"}}]}\n\n', headers=SSE)
    with pytest.raises(ModelError, match="larger than 16 MB"):
        model(server).stream(HELLO, lambda text: None)


def run(server, capsys, *args):
    code = main(["--base-url", server.url, "-m", "m", "--timeout", "5", *args])
    out, err = capsys.readouterr()
    return code, out, err


def events(path):
    """The trace without what differs from run to run (times, and the request's streaming options)."""
    records = [json.loads(line) for line in path.read_text().splitlines()]
    for record in records:
        record.pop("time")
        record.pop("seconds", None)
    return records


SCRIPTS = {
    "prompt": lambda server: [server.reply("I will compute it."),  # no JSON: re-asked
                              server.reply(action("calculator", expression="6*7")),
                              server.reply(action(answer="It is 42, \"exactly\".\nDone."))],
    "native": lambda server: [server.reply(tool_calls=[{"id": "c1", "name": "calculator",
                                                        "arguments": {"expression": "6*7"}}]),
                              server.reply('{"name": "websearch", "arguments": {}}'),  # a written call: re-asked
                              server.reply("It is 42, \"exactly\".\nDone.")],
}


@pytest.mark.parametrize("protocol", ["prompt", "native"])
def test_a_streamed_run_prints_the_final_answer_and_traces_what_an_unstreamed_one_does(server, workspace, capsys,
                                                                                      protocol):
    traces = {}
    for stream in ("--no-stream", "--stream"):
        SCRIPTS[protocol](server)
        trace = workspace / f"{stream}.jsonl"
        code, out, err = run(server, capsys, "--protocol", protocol, stream, "--trace", str(trace), "6*7?")
        assert (code, out) == (0, 'It is 42, "exactly".\nDone.\n')
        assert "1 re-ask" in err
        traces[stream] = events(trace)
    assert traces["--stream"] == traces["--no-stream"]
    assert server.requests[-1]["body"]["stream"] is True and "stream" not in server.requests[0]["body"]


def test_stream_and_json_do_not_go_together(server, workspace, capsys):
    code, out, err = run(server, capsys, "--stream", "--json", "x")
    assert (code, out) == (2, "") and "drop one" in err
