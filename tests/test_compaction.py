"""Compaction that summarises (--context-window): the older steps become a brief the model writes; the system
prompt, the task, the plan and the latest steps stay as they are; a call is never cut from its result."""
import json
import re

import pytest

from agent import Agent, Reply, ScriptedModel, Settings
from agent.cli import main
from agent.compaction import Summariser, fair_share, pieces
from agent.protocols import NativeProtocol, PromptProtocol, asks_for_tools
from agent.tools import Plan, Registry
from tests.support import action

PROTOCOLS = ["prompt", "native"]
PAGES = 8


def is_brief_request(messages) -> bool:
    return "write a brief of it" in messages[0]["content"]


def brief(messages) -> str:
    """The brief a careful model would write: the pages read, in what it is shown (an earlier brief too)."""
    text = messages[0]["content"]
    read = {int(n) for n in re.findall(r"page (\d+): word", text)}
    read |= {int(n) for listed in re.findall(r"read pages ([\d, ]+)", text) for n in listed.split(", ") if n}
    return f"Goal: read the pages and name the last word of each.\nFacts: read pages {', '.join(map(str, sorted(read)))}."


class BriefingModel(ScriptedModel):
    """A scripted model that also writes briefs when asked for one."""

    def __init__(self, replies):
        super().__init__(replies)
        self.briefs = []

    def complete(self, messages, **options):
        if is_brief_request(messages):
            self.briefs.append(messages)
            return Reply(content=brief(messages))
        return super().complete(messages, **options)


def pages() -> Registry:
    registry = Registry()

    @registry.tool
    def page(n: int) -> str:
        """Read a page of the book."""
        return f"page {n}: word{n} " + "lorem ipsum " * 250

    return registry


def call(protocol, index, tool, arguments):
    if protocol == "native":
        return Reply(tool_calls=[{"id": f"id_{index}", "type": "function",
                                  "function": {"name": tool, "arguments": json.dumps(arguments)}}])
    return Reply(content=json.dumps({"type": "tool_call", "tool": tool, "arguments": arguments}))


def final(protocol, answer):
    return Reply(content=answer if protocol == "native" else json.dumps({"type": "final", "answer": answer}))


def paired(messages) -> bool:
    """Every native tool result answers a call of the assistant message before its run of results."""
    ids = set()
    for message in messages:
        if message["role"] == "assistant":
            ids = {c["id"] for c in message.get("tool_calls") or []}
        elif message["role"] == "tool" and message["tool_call_id"] not in ids:
            return False
    return True


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_long_run_is_summarised_more_than_once_and_keeps_the_task_the_plan_and_the_latest_steps(protocol):
    registry = pages()
    plan = Plan()
    registry.add(plan.tool)
    todos = [{"content": f"read page {n}", "status": "pending"} for n in range(1, PAGES + 1)]
    replies = [call(protocol, 0, "todo_write", {"todos": todos})]
    replies += [call(protocol, n, "page", {"n": n}) for n in range(1, PAGES + 1)] + [final(protocol, "word1 to word8")]
    model = BriefingModel(replies)
    proto = NativeProtocol(registry) if protocol == "native" else PromptProtocol(registry)
    agent = Agent(model, registry, proto, Settings(context_window=2500))
    events = []
    agent.emit = lambda event, **data: events.append((event, data))
    result = agent.run("Read every page and name the last word of each.")
    assert (result.status, result.answer) == ("final", "word1 to word8")
    compactions = [data for event, data in events if event == "compaction"]
    assert len(compactions) >= 2 and len(model.briefs) >= len(compactions)
    assert all(c["tokens_after"] < c["tokens_before"] and c["chars_after"] < c["chars_before"] for c in compactions)
    assert result.model_calls == len(replies) + len(model.briefs)
    first = model.calls[0]["messages"]
    for sent in (c["messages"] for c in model.calls if not is_brief_request(c["messages"])):
        assert sent[:2] == first[:2]  # the system prompt and the task, as they were
        assert sum(len(m["content"] or "") for m in sent) < 2500 * 3 * 2  # far below the uncompacted size
        assert paired(sent)
    last = model.calls[-1]["messages"]
    assert last[2]["content"].startswith("[The earlier part of this conversation was replaced by this brief")
    in_brief = {n for listed in re.findall(r"Facts: read pages ([\d, ]+)\.", last[2]["content"]) for n in listed.split(", ")}
    verbatim = {str(n) for n in range(1, PAGES + 1) if any(f"page {n}: word{n}" in (m["content"] or "") for m in last[3:])}
    assert in_brief | verbatim == {str(n) for n in range(1, PAGES + 1)} and "8" in verbatim  # nothing lost
    assert any("read page 1" in (m["content"] or "") for m in last)  # the plan's step stays
    steps = [m for m in last if asks_for_tools(m)]
    assert len(steps) >= 2 and "todo_write" in json.dumps(steps[0])  # the plan's step, and the latest ones
    assert "page 8: word8" in last[-1]["content"]


def test_a_later_brief_is_written_from_the_earlier_one():
    model = BriefingModel([call("prompt", n, "page", {"n": n}) for n in range(1, PAGES + 1)] + [final("prompt", "done")])
    agent = Agent(model, pages(), settings=Settings(context_window=2000))
    assert agent.run("Read the pages.").status == "final"
    assert len(model.briefs) >= 2
    assert any("[The earlier part of this conversation was replaced by this brief" in messages[0]["content"]
               for messages in model.briefs)


def test_the_summariser_reads_the_task_and_each_long_result_whole_when_the_window_allows():
    """A fact in the middle of a long tool result reaches the brief's writer, and so does the task."""
    registry = Registry()

    @registry.tool
    def page(n: int) -> str:
        """Read a page of the book."""
        return "filler " * 250 + f"the secret of page {n} is {n * 7}" + " filler" * 250

    model = BriefingModel([call("prompt", n, "page", {"n": n}) for n in range(1, 7)] + [final("prompt", "done")])
    assert Agent(model, registry, settings=Settings(context_window=8192)).run("Add up the secrets.").status == "final"
    request = model.briefs[0][0]["content"]
    assert "Add up the secrets." in request and "the secret of page 1 is 7" in request and "characters cut" not in request


class CountingModel(BriefingModel):
    """Reports its prompt tokens as the endpoint would: here, one token for every five characters."""

    def complete(self, messages, **options):
        reply = super().complete(messages, **options)
        tokens = sum(len(m.get("content") or "") for m in messages) // 5
        return Reply(content=reply.content, tool_calls=reply.tool_calls, usage={"prompt_tokens": tokens,
                                                                                 "completion_tokens": 10})


def test_a_brief_is_written_in_pieces_sized_by_the_reported_tokens_each_result_whole():
    """The first compaction's older part, six results of 3,900 characters: at the 5 characters a token the
    endpoint's counts show, 0.4 of a window of 8,192 tokens holds three of them whole (at the cautious 3, two),
    so the brief takes two requests, each of its own piece, and no result is cut; the brief joins both."""
    registry = Registry()

    @registry.tool
    def page(n: int) -> str:
        """Read a page of the book."""
        return "filler " * 270 + f"the secret of page {n} is {n * 7}" + " filler" * 270

    model = CountingModel([call("prompt", n, "page", {"n": n}) for n in range(1, 12)] + [final("prompt", "done")])
    agent = Agent(model, registry, settings=Settings(context_window=8192))
    briefs_by_compaction, summaries = [], []
    agent.emit = lambda event, **data: (briefs_by_compaction.append(len(model.briefs)), summaries.append(
        data["summary"])) if event == "compaction" else 0
    assert agent.run("Add up the secrets.").status == "final"
    first = [messages[0]["content"] for messages in model.briefs[:briefs_by_compaction[0]]]
    secrets = [int(n) for text in first for n in re.findall(r"the secret of page (\d+) is", text)]
    assert len(first) == 2 and sorted(secrets) == list(range(1, len(secrets) + 1)) and len(secrets) >= 6
    assert all("characters cut" not in text and "Add up the secrets." in text for text in first)
    assert summaries[0].count("Goal:") == 2  # the two pieces' briefs, joined


@pytest.mark.parametrize("sizes, budget, share", [
    ([100, 100, 5000, 5000], 10_000, 4900),  # the short ones whole, the long ones split what is left
    ([100, 200], 10_000, 200),  # all fit: nothing is cut
    ([9000, 9000, 9000], 9000, 3000),
    ([], 100, 0),
])
def test_fair_share(sizes, budget, share):
    assert fair_share(sizes, budget) == share
    assert sum(min(size, share) for size in sizes) <= budget


def test_without_a_context_window_nothing_is_summarised():
    model = BriefingModel([call("prompt", n, "page", {"n": n}) for n in range(1, 4)] + [final("prompt", "done")])
    assert Agent(model, pages()).run("Read the pages.").status == "final"
    assert model.briefs == []


def test_an_empty_brief_leaves_the_history_and_is_not_asked_for_again():
    class Silent(BriefingModel):
        def complete(self, messages, **options):
            if is_brief_request(messages):
                self.briefs.append(messages)
                return Reply(content="<think>hmm</think>  ")
            return ScriptedModel.complete(self, messages, **options)

    model = Silent([call("prompt", n, "page", {"n": n}) for n in range(1, PAGES + 1)] + [final("prompt", "done")])
    agent = Agent(model, pages(), settings=Settings(context_window=2000))
    events = []
    agent.emit = lambda event, **data: events.append(event)
    assert agent.run("Read the pages.").status == "final"
    assert len(model.briefs) == 1 and events.count("compaction_failed") == 1 and "compaction" not in events


class Counted:
    reported = None  # what Replies keeps: (messages of the history, prompt tokens) of the latest call


def test_reported_prompt_tokens_are_used_where_the_endpoint_gives_them():
    history = [{"role": "system", "content": "s"}, {"role": "user", "content": "t"},
               {"role": "assistant", "content": "x" * 300}]
    replies = Counted()
    summariser = Summariser(ScriptedModel(), 8192, history[1], lambda *a, **k: None, replies)
    assert summariser.tokens(history) == 4 + 4 + (100 + 4)  # an estimate: 3 characters a token, 4 a message
    replies.reported = (2, 5000)  # the endpoint counted the first two messages
    assert summariser.tokens(history) == 5000 + 104
    replies.reported = (9, 5000)  # from a longer history than this one: not this one's size
    assert summariser.tokens(history) == 112


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_long_run_through_the_command_line_compacts_twice_and_answers(server, workspace, capsys, protocol):
    server.answer_when(lambda body: is_brief_request(body["messages"]), "Goal: add up the numbers.\nFacts: seen so far.")
    for n in range(1, PAGES + 1):
        (workspace / f"part{n}.txt").write_text(f"number {n}\n" + "filler text " * 200)
        if protocol == "native":
            server.reply(tool_calls=[{"name": "read_file", "arguments": {"path": f"part{n}.txt"}}])
        else:
            server.reply(action("read_file", path=f"part{n}.txt"))
    server.reply("36" if protocol == "native" else action(answer="36"))
    trace = workspace / "trace.jsonl"
    code = main(["--base-url", server.url, "-m", "m", "--timeout", "5", "--protocol", protocol, "--tools", "read_file",
                 "--context-window", "3000", "--trace", str(trace), "Add up the numbers in part1.txt to part8.txt."])
    out, err = capsys.readouterr()
    assert (code, out) == (0, "36\n")
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    compactions = [e for e in events if e["event"] == "compaction"]
    assert len(compactions) >= 2
    briefs = [r for r in server.requests if is_brief_request(r["body"]["messages"])]
    assert len(briefs) >= len(compactions) and "tools" not in briefs[0]["body"]
    assert events[-1]["model_calls"] == PAGES + 1 + len(briefs)
    assert all(paired(request["body"]["messages"]) for request in server.requests)
    assert all(e["tokens_before"] > 3000 * 3 // 4 > e["tokens_after"] for e in compactions)  # 3/4 of the window
    assert len(compactions) < PAGES // 2  # each brief makes room for more than the next step
    last = server.requests[-1]["body"]["messages"]
    assert last[1]["content"] == "Add up the numbers in part1.txt to part8.txt."
    assert "Facts: seen so far." in last[2]["content"] and "number 8" in last[-1]["content"]


def test_pieces_keep_order_and_fit_the_budget_an_empty_message_included():
    empty, short, long = ({"role": "user", "content": "x" * n} for n in (0, 40, 90))
    assert pieces([empty, short, long, short], each=80, budget=100) == [[empty, short], [long], [short]]
