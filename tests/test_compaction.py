"""Compaction that summarises (--context-window): the older steps become a brief the model writes; the system
prompt, the task, the plan and the latest steps stay as they are; a call is never cut from its result."""
import json
import re
from collections import Counter

import pytest

from agent import Agent, Reply, ScriptedModel, Settings
from agent.cli import main
from agent.compaction import (BRIEF_SHARE, MAX_NOTES, NOTE_CHARS, NOTED, SHORT_RESULT_CHARS, Summariser, missed_figures,
                              steps, unrepeated)
from agent.protocols import NativeProtocol, PromptProtocol, asks_for_tools
from agent.replies import Sent
from agent.tools import Plan, Registry
from agent.trace import ignore
from tests.support import action

TASK_MESSAGE = {"role": "user", "content": "t"}
PROTOCOLS = ["prompt", "native"]
PAGES = 8


def is_brief_request(messages) -> bool:
    """A request for the note of one long result, as a brief is written."""
    return "Write down what this result says that the task needs" in messages[0]["content"]


def brief(messages) -> str:
    """The note a careful model would write of the one result it is shown: the page and its word."""
    return " ".join(f"page {n} ends with word{n}." for n in re.findall(r"page (\d+): word", messages[0]["content"]))


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
    events = []
    agent = Agent(model, registry, proto, Settings(context_window=2500),
                  emit=lambda event, **data: events.append((event, data)))
    result = agent.run("Read every page and name the last word of each.")
    assert (result.status, result.answer) == ("final", "word1 to word8")
    compactions = [data for event, data in events if event == "compaction"]
    assert len(compactions) >= 2 and len(model.briefs) >= len(compactions)
    assert all(c["tokens_after"] < c["tokens_before"] and c["chars_after"] < c["chars_before"] for c in compactions)
    assert all(c["messages_after"] <= c["messages_before"] and 0 < c["summarised"] < c["messages_before"]
               for c in compactions)
    assert result.model_calls == len(replies) + len(model.briefs)
    first = model.calls[0]["messages"]
    for sent in (c["messages"] for c in model.calls if not is_brief_request(c["messages"])):
        assert sent[:2] == first[:2]  # the system prompt and the task, as they were
        assert sum(len(m["content"] or "") for m in sent) < 2500 * 3 * 2  # far below the uncompacted size
        assert paired(sent)
    last = model.calls[-1]["messages"]
    texts = [m["content"] or "" for m in last[2:]]
    noted = set(re.findall(r"page (\d+) ends with word\1", " ".join(texts)))
    verbatim = {str(n) for n in range(1, PAGES + 1) if any(f"page {n}: word{n}" in text for text in texts)}
    assert noted | verbatim == {str(n) for n in range(1, PAGES + 1)} and "8" in verbatim  # nothing lost
    assert any(text.startswith(NOTED) for text in texts)  # long results replaced by their notes
    assert any("read page 1" in text for text in texts)  # the plan's step stays
    steps = [m for m in last if asks_for_tools(m)]
    assert "todo_write" in json.dumps(steps) and len(steps) >= 3  # the plan's step, older calls, the latest
    assert "page 8: word8" in last[-1]["content"]


def test_a_later_brief_carries_the_earlier_one_on():
    model = BriefingModel([call("prompt", n, "page", {"n": n}) for n in range(1, PAGES + 1)] + [final("prompt", "done")])
    summaries = []
    agent = Agent(model, pages(), settings=Settings(context_window=2000),
                  emit=lambda event, **data: summaries.append(data["summary"]) if event == "compaction" else 0)
    assert agent.run("Read the pages.").status == "final"
    assert len(summaries) >= 2 and summaries[0] in summaries[1]
    assert not any("ends with" in request[0]["content"] for request in model.briefs)  # no brief is read again


def test_each_long_result_is_read_alone_and_whole_with_the_task():
    """A fact in the middle of a long tool result reaches the note's writer, and so does the task."""
    registry = Registry()

    @registry.tool
    def page(n: int) -> str:
        """Read a page of the book."""
        return "filler " * 250 + f"the secret of page {n} is {n * 7}" + " filler" * 250

    model = BriefingModel([call("prompt", n, "page", {"n": n}) for n in range(1, 7)] + [final("prompt", "done")])
    assert Agent(model, registry, settings=Settings(context_window=8192)).run("Add up the secrets.").status == "final"
    assert model.briefs
    for number, request in enumerate(model.briefs, 1):
        text = request[0]["content"]
        assert "Add up the secrets." in text and f'page {{"n": {number}}}' in text and "characters cut" not in text
        assert re.findall(r"the secret of page (\d+) is", text) == [str(number)]


def test_a_result_longer_than_a_request_holds_is_cut_for_its_note():
    registry = Registry()

    @registry.tool
    def page(n: int) -> str:
        """Read a page of the book."""
        return f"page {n}: word{n} " + "lorem ipsum " * 3000

    model = BriefingModel([call("prompt", n, "page", {"n": n}) for n in range(1, 4)] + [final("prompt", "done")])
    assert Agent(model, registry, settings=Settings(context_window=4000)).run("Read the pages.").status == "final"
    assert model.briefs and all("characters cut" in request[0]["content"] for request in model.briefs)
    assert all(len(request[0]["content"]) < 4000 * 0.6 * 3 + 1000 for request in model.briefs)


def prompt_steps(results: list[str]) -> list[dict]:
    history = []
    for n, result in enumerate(results):
        history += [{"role": "assistant", "content": json.dumps({"type": "tool_call", "tool": "page",
                                                                 "arguments": {"n": n}})},
                    {"role": "user", "content": f"Result of page:\n{result}"}]
    return history


def summarise(summariser, history: list[dict], task: dict = TASK_MESSAGE) -> tuple[str, dict, int]:
    """The text of what compaction makes of ``history`` (the older steps of a run), its usage and requests."""
    shortened = summariser._shortened(task, [], history, [], 3)
    return shortened.text, shortened.usage, shortened.requests


def summary_of(history: list[dict]) -> tuple[str, int, BriefingModel]:
    model = BriefingModel([])
    summariser = Summariser(model, 8192, ignore, Counter())
    summary, _, requests = summarise(summariser, history)
    return summary, requests, model


def test_short_results_stay_as_they_are_and_long_ones_become_notes():
    summary, requests, model = summary_of(prompt_steps(["short", "page 1: word1 " + "x" * 900]))
    assert requests == 1 == len(model.briefs)
    assert summary.splitlines() == ['- page {"n": 0} -> Result of page: short',
                                    '- page {"n": 1} -> page 1 ends with word1.']


def test_the_brief_requests_are_bounded():
    summary, requests, model = summary_of(prompt_steps([f"page {n}: word{n} " + "y" * 2000
                                                        for n in range(MAX_NOTES + 5)]))
    assert requests == MAX_NOTES == len(model.briefs)
    assert len(summary.splitlines()) == MAX_NOTES + 5
    assert all(len(line) < NOTE_CHARS + 100 for line in summary.splitlines())


def test_steps_leave_out_replies_that_were_reasked_and_keep_the_turns_of_a_conversation():
    reask = "Your last reply could not be used (no_json): the reply was empty\nReply again..."
    history = [
        {"role": "assistant", "content": "Sure, let me look."}, {"role": "user", "content": reask},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "page", "arguments": '{"n": 1}'}},
            {"id": "b", "type": "function", "function": {"name": "page", "arguments": '{"n": 2}'}}]},
        {"role": "tool", "tool_call_id": "a", "content": "one"}, {"role": "tool", "tool_call_id": "b", "content": "two"},
        {"role": "assistant", "content": "The pages say one and two."},
        {"role": "user", "content": "And page 3?"},
    ]
    assert [(call, text) for call, text, _ in steps(history)] == [('page {"n": 1}; page {"n": 2}', "one\ntwo"),
                              (None, "Assistant: The pages say one and two."), (None, "User: And page 3?")]


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
    events = []
    agent = Agent(model, pages(), settings=Settings(context_window=2000), emit=lambda event, **data: events.append(event))
    assert agent.run("Read the pages.").status == "final"
    assert len(model.briefs) == 1 and events.count("compaction_failed") == 1 and "compaction" not in events




def test_reported_prompt_tokens_are_used_where_the_endpoint_gives_them():
    history = [{"role": "system", "content": "s"}, {"role": "user", "content": "t"},
               {"role": "assistant", "content": "x" * 300}]
    summariser = Summariser(ScriptedModel(), 8192, ignore, Counter())
    assert summariser.tokens(history, None) == 4 + 4 + (100 + 4)  # an estimate: 3 characters a token, 4 a message
    assert summariser.tokens(history, Sent(history, 2, 5000)) == 5000 + 104  # the endpoint counted the first two
    replaced = list(history)  # a history compaction has since replaced: the count is not this one's size
    assert summariser.tokens(history, Sent(replaced, 2, 5000)) == 112


WINDOW = 3400  # room for the system prompt and a little over two pages


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_long_run_through_the_command_line_compacts_twice_and_answers(server, workspace, capsys, protocol):
    server.answer_when(lambda body: is_brief_request(body["messages"]), "Seen so far.")
    for n in range(1, PAGES + 1):
        (workspace / f"part{n}.txt").write_text(f"number {n}\n" + "filler text " * 200)
        if protocol == "native":
            server.reply(tool_calls=[{"name": "read_file", "arguments": {"path": f"part{n}.txt"}}])
        else:
            server.reply(action("read_file", path=f"part{n}.txt"))
    server.reply("36" if protocol == "native" else action(answer="36"))
    trace = workspace / "trace.jsonl"
    code = main(["--base-url", server.url, "-m", "m", "--timeout", "5", "--protocol", protocol, "--tools", "read_file",
                 "--context-window", str(WINDOW), "--trace", str(trace), "Add up the numbers in part1.txt to part8.txt."])
    out, err = capsys.readouterr()
    assert (code, out) == (0, "36\n")
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    compactions = [e for e in events if e["event"] == "compaction"]
    assert len(compactions) >= 2
    briefs = [r for r in server.requests if is_brief_request(r["body"]["messages"])]
    assert len(briefs) >= len(compactions) and "tools" not in briefs[0]["body"]
    assert events[-1]["model_calls"] == PAGES + 1 + len(briefs)
    assert all(paired(request["body"]["messages"]) for request in server.requests)
    assert all(e["tokens_before"] > WINDOW * 3 // 4 > e["tokens_after"] for e in compactions)  # 3/4 of the window
    assert len(compactions) < PAGES // 2  # each brief makes room for more than the next step
    last = server.requests[-1]["body"]["messages"]
    assert last[1]["content"] == "Add up the numbers in part1.txt to part8.txt."
    noted = [m["content"] for m in last if (m["content"] or "").startswith(f"{NOTED} Seen so far.")]
    assert noted and "number 8" in last[-1]["content"]
    assert all(f"The result says: number {n}" in text for n, text in enumerate(noted, 1))  # the figures quoted
    assert [json.dumps(m).count("read_file") for m in last if asks_for_tools(m)] == [1] * PAGES  # every call kept


@pytest.mark.parametrize("note, kept", [
    ("1200 thousand euros, 1200 thousand euros, 1200 thousand euros, 1200 thou", "1200 thousand euros, 1200 thou"),
    ("Quarterly report, North region\n\nQuarterly report, North region", "Quarterly report, North region"),
    ("Revenue: 990. Staff: 9, 9 left.", "Revenue: 990. Staff: 9, 9 left."),
    ("", ""),
])
def test_a_note_keeps_each_clause_once(note, kept):
    assert unrepeated(note) == kept


def test_a_note_that_repeats_itself_is_kept_once_in_the_brief():
    class Repeating(BriefingModel):
        def complete(self, messages, **options):
            self.briefs.append(messages)
            return Reply(content="word1, " * 200)

    summariser = Summariser(Repeating([]), 8192, ignore, Counter())
    summary, _, requests = summarise(summariser, prompt_steps(["page 1: word1 " + "x" * 900]))
    assert (summary, requests) == ('- page {"n": 0} -> word1,', 1)


REPORT = ("Quarterly report, East region\n\nStaff turnover stayed low; 9 people left the region. "
          "Revenue for the quarter: 2,300 thousand euros. The audit found no issues.\nThe East region piloted 4 "
          "programmes.")
TASK = "part1.txt to part8.txt are quarterly reports, one per region. Add up the eight revenues."


@pytest.mark.parametrize("note, quoted", [
    ("Quarterly report, East region", "Revenue for the quarter: 2,300 thousand euros."),  # the figure lost
    ("East: revenue 2300 thousand euros.", ""),  # kept, however it is written
    ("East: 2,300 thousand euros.", ""),
])
def test_a_note_that_lost_the_figure_the_task_asks_for_gets_its_sentence_back(note, quoted):
    assert missed_figures(REPORT, TASK, note) == quoted


def test_the_sentences_quoted_for_a_note_are_few_and_short():
    assert missed_figures("No figures here. Nor here.", TASK, "") == ""
    assert missed_figures("The sky is 3 km up. Birds: 12.", TASK, "") == ""  # no word of the task
    many = " ".join(f"Revenue for month {n}: {n}00 euros." for n in range(1, 200))
    quoted = missed_figures(many, TASK, "")
    assert quoted.startswith("Revenue for month 1: 100 euros.") and len(quoted) < SHORT_RESULT_CHARS


def test_the_brief_quotes_the_sentence_a_note_left_out():
    class Forgetful(BriefingModel):
        def complete(self, messages, **options):
            self.briefs.append(messages)
            return Reply(content="Quarterly report, East region")

    summariser = Summariser(Forgetful([]), 8192, ignore, Counter())
    summary, _, _ = summarise(summariser, prompt_steps([REPORT + " Filler." * 100]), {"role": "user", "content": TASK})
    assert summary == ('- page {"n": 0} -> Quarterly report, East region The result says: '
                       'Revenue for the quarter: 2,300 thousand euros.')


def shortened(history, earlier=(), kept=(), window=8192, model=None):
    model = model or BriefingModel([])
    summariser = Summariser(model, window, ignore, Counter())
    return summariser._shortened(TASK_MESSAGE, list(earlier), history, list(kept), 3), model


def test_older_steps_keep_their_calls_and_have_their_long_results_replaced_by_notes():
    history = prompt_steps(["short", "page 1: word1 " + "x" * 900])
    done, model = shortened(history)
    assert done.brief == "" and len(model.briefs) == 1
    assert done.messages == [history[0], history[1], history[2],
                             {"role": "user", "content": f"{NOTED} page 1 ends with word1."}]
    again, model = shortened(done.messages)  # a later compaction: nothing to note again
    assert again.messages == done.messages and model.briefs == [] and again.text == done.text


def test_past_a_share_of_the_window_the_oldest_steps_become_one_brief():
    history = prompt_steps([f"page {n}: word{n} " + "y" * 2000 for n in range(12)])
    done, _ = shortened(history, window=2000)  # room for 2000 * BRIEF_SHARE tokens of older steps
    brief = done.brief.splitlines()
    calls = [json.loads(m["content"])["arguments"]["n"] for m in done.messages if m["role"] == "assistant"]
    assert brief and calls and len(brief) + len(calls) == 12
    assert [line.split(" -> ")[0] for line in brief] == [f'- page {{"n": {n}}}' for n in range(len(brief))]
    assert calls == list(range(len(brief), 12))  # the newest stay as steps, in order
    assert sum(len(m["content"]) for m in done.messages) <= 2000 * BRIEF_SHARE * 3
    assert done.text.splitlines() == brief + [f'- page {{"n": {n}}} -> page {n} ends with word{n}.' for n in calls]


def test_the_turns_before_the_task_go_into_the_brief_and_the_kept_step_stays_as_it_is():
    earlier = [{"role": "user", "content": "Read page 0."}, *prompt_steps(["page 0: word0 " + "z" * 900]),
               {"role": "assistant", "content": "It says word0."}]
    history = prompt_steps([f"page {n}: word{n} " + "y" * 2000 for n in range(12)])
    plan = history[2:4]  # the step of page 1, as the plan's would be
    done, _ = shortened(history, earlier=earlier, kept=[plan[0]], window=2000)
    assert done.brief.splitlines()[:3] == ["User: Read page 0.", '- page {"n": 0} -> page 0 ends with word0.',
                                           "Assistant: It says word0."]
    assert done.messages[:2] == plan  # unchanged, and not folded though it is among the oldest
    assert 'page {"n": 0}' in done.brief and 'page {"n": 1}' not in done.brief


def test_a_native_step_of_several_calls_keeps_every_tool_call_id():
    history = [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "page", "arguments": '{"n": 1}'}},
        {"id": "b", "type": "function", "function": {"name": "page", "arguments": '{"n": 2}'}}]},
        {"role": "tool", "tool_call_id": "a", "content": "page 1: word1 " + "x" * 900},
        {"role": "tool", "tool_call_id": "b", "content": "page 2: word2 " + "x" * 900}]
    done, _ = shortened(history)
    assert done.messages[0] is history[0] and paired(done.messages)
    assert [m["content"] for m in done.messages[1:]] == [f"{NOTED} page 1 ends with word1. page 2 ends with word2.",
                                                         f"{NOTED} with the result above"]


def test_in_a_conversation_the_earlier_turns_go_into_the_brief_and_the_saved_history_keeps_it():
    replies = [call("prompt", 1, "page", {"n": 1}), call("prompt", 2, "page", {"n": 2}), final("prompt", "word1, word2")]
    replies += [call("prompt", n, "page", {"n": n}) for n in range(3, 7)] + [final("prompt", "word3 to word6")]
    model = BriefingModel(replies)
    agent = Agent(model, pages(), settings=Settings(context_window=2000))
    first = agent.run("Read pages 1 and 2.")
    second = agent.run("Now read pages 3 to 6.", history=first.messages)
    assert (first.answer, second.answer) == ("word1, word2", "word3 to word6")
    saved = second.messages
    assert saved[1]["content"] == "Now read pages 3 to 6."  # the task of this turn, right after the system prompt
    brief = saved[2]["content"]
    assert brief.startswith("[The earlier part of this conversation was replaced by this brief")
    assert "User: Read pages 1 and 2." in brief and "page 1 ends with word1" in brief and "word1, word2" in brief
    assert "page 6: word6" in saved[-2]["content"] and paired(saved)
