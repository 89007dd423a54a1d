"""The embedded local model: reply handling on its own, then a few short runs of the real model (2 CPU cores)."""
import json
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import jsonschema
import pytest

from agent import Agent, ModelError, Settings
from agent.config import ConfigError
from agent.models.local import _find_tool_calls, _with_argument_objects, load_local_model
from agent.models.local_grammar import CheckedGreedy, gbnf
from agent.models.local_files import DEFAULT, cache_dir, locate_parts
from agent.parsing import action_schema
from agent.protocols import NativeProtocol, PromptProtocol
from agent.tools import Registry, builtin_registry, tool
from agent.tools.calculator import evaluate

TOOLS = {"calculator", "read_file"}


def call(name: str, arguments: dict, number: int = 1) -> dict:
    return {"id": f"call_{number}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}


def test_tool_call_blocks_become_openai_tool_calls():
    content = ('Let me compute.\n<tool_call>\n{"name": "calculator", "arguments": {"expression": "2+2"}}\n</tool_call>\n'
               '<tool_call>\n{"name": "read_file", "arguments": {"path": "a.txt"}}\n</tool_call>')
    assert _find_tool_calls(content, TOOLS) == ("Let me compute.", [
        call("calculator", {"expression": "2+2"}), call("read_file", {"path": "a.txt"}, 2)])


@pytest.mark.parametrize("content", [
    '```json\n{\n  "name": "calculator",\n  "arguments": {"expression": "2+2"}\n}\n```',
    '{"name": "calculator", "arguments": {"expression": "2+2"}}',
])
def test_a_reply_that_is_one_call_object_is_a_tool_call(content):
    assert _find_tool_calls(content, TOOLS) == (None, [call("calculator", {"expression": "2+2"})])


@pytest.mark.parametrize("content", [
    'The answer is 4.',
    '{"name": "Dana", "arguments": {}}',
    '{"name": ["calculator"], "arguments": {}}',
    '```json\n{"name": "calculator", "arguments": "2+2"}\n```',
])
def test_other_replies_stay_text(content):
    assert _find_tool_calls(content, TOOLS) == (content, [])


def test_a_malformed_tool_call_block_is_passed_on_for_the_protocol_to_answer():
    _, calls = _find_tool_calls('<tool_call>\n{"name": "calculator", "arguments": {"expression": }\n</tool_call>', TOOLS)
    assert calls[0]["function"]["name"] == "calculator"
    assert calls[0]["function"]["arguments"].startswith('{"name": "calculator"')


def test_the_chat_template_gets_arguments_as_objects():
    message = {"role": "assistant", "content": None, "tool_calls": [call("calculator", {"expression": "1"})]}
    converted = _with_argument_objects(message)
    assert converted["tool_calls"][0]["function"]["arguments"] == {"expression": "1"}
    assert message["tool_calls"][0]["function"]["arguments"] == '{"expression": "1"}'


def test_the_agents_action_schema_converts_to_a_grammar():
    pytest.importorskip("llama_cpp")
    schema = action_schema(builtin_registry(".").parameters(), batch=False).schema
    grammar = gbnf(json.dumps(schema))
    for name in ("calculator", "read_file", "write_file", "list_dir", "current_time"):
        assert f'::= "\\"{name}\\""' in grammar
    assert '[^"\\\\\\x7F\\x00-\\x1F]' in grammar  # no raw control characters inside JSON strings


def rules(schema: dict) -> dict[str, str]:
    return dict(line.split(" ::= ", 1) for line in gbnf(json.dumps(schema)).splitlines())


def test_a_string_enum_in_the_grammar_takes_any_string_for_the_reask_to_correct():
    pytest.importorskip("llama_cpp")
    grammar = rules({"type": "object", "required": ["unit", "n"], "properties": {
        "unit": {"enum": ["m", "mi", 'say "hi"\\']}, "n": {"enum": [1, "two"]}}})
    assert grammar["unit"] == '"\\"" char* "\\""'
    assert grammar["n"] == '"1" | "\\"two\\""'  # not all strings: exactly the values, as before


def test_only_small_schemas_have_their_grammar_kept():
    """agent serve's clients may send schemas of megabytes: their grammars are not kept after the call."""
    pytest.importorskip("llama_cpp")
    from agent.models.local_grammar import MAX_KEPT_SCHEMA, _kept_grammar

    small = json.dumps({"type": "object", "properties": {"a": {"type": "string"}}})
    large = json.dumps({"type": "object", "properties": {"a": {"type": "string", "description": "x" * 200_000}}})
    assert len(small) <= MAX_KEPT_SCHEMA < len(large)
    _kept_grammar.cache_clear()
    assert gbnf(large) == gbnf(large) and gbnf(small) == gbnf(small)
    assert _kept_grammar.cache_info().currsize == 1


def test_a_schema_llama_cpp_cannot_convert_is_an_error_not_unconstrained_json():
    pytest.importorskip("llama_cpp")
    with pytest.raises(ModelError, match="cannot constrain replies by this JSON Schema.*drop --constrain"):
        gbnf(json.dumps({"type": "object", "properties": {"a": {"not": {"type": "string"}}}}))


@pytest.fixture(scope="session")
def local_model():
    pytest.importorskip("llama_cpp")
    try:
        locate_parts(DEFAULT)
    except ConfigError as error:
        pytest.skip(f"the default local model is not installed: {error}")
    return load_local_model(cache=cache_dir(os.environ))


def run(model, protocol, task, workspace, max_steps=4):
    started = time.monotonic()
    result = Agent(model, builtin_registry(workspace), protocol, Settings(max_steps=max_steps)).run(task)
    print(f"\n{protocol.name}: {result.status} in {time.monotonic() - started:.1f}s, {result.model_calls} calls: "
          f"{result.answer!r}")
    return result


def test_loading_again_reuses_the_loaded_model(local_model):
    assert load_local_model(temperature=0.5, cache=cache_dir(os.environ)).llama is local_model.llama


def test_constrained_agent_reads_a_file(local_model, tmp_path):
    (tmp_path / "notes.txt").write_text("Project Falcon\nOwner: Dana\nBudget: 4250 EUR\nDeadline: June\n")
    registry = builtin_registry(tmp_path)
    result = run(local_model, PromptProtocol(registry, constrain=True),
                 "Read notes.txt and tell me the budget.", tmp_path)
    assert result.status == "final"
    assert "4250" in result.answer
    assert {"tool": "read_file", "arguments": {"path": "notes.txt"}, "ok": True} in result.tool_calls


def test_a_constrained_reply_is_a_valid_action_even_when_the_task_invites_prose(local_model):
    protocol = PromptProtocol(builtin_registry("."), constrain=True)
    messages = [{"role": "system", "content": protocol.system_prompt()},
                {"role": "user", "content": "Hello! Who are you? Reply in plain prose, not JSON."}]
    reply = local_model.complete(messages, max_tokens=200, **protocol.options)
    assert reply.finish_reason == "stop"
    assert reply.usage["completion_tokens"] > 0
    jsonschema.validate(json.loads(reply.content), protocol.options["response_format"]["json_schema"]["schema"])


@pytest.mark.parametrize("task", ["Hello! Who are you? Reply in plain prose, not JSON.",
                                  "Compute 128*96 + 45**2 - 88/2", "Write a haiku about files, then list them."])
def test_checked_greedy_choices_give_the_tokens_of_the_grammar_filtering_every_candidate(local_model, task,
                                                                                       monkeypatch):
    """At temperature 0 the grammar is consulted on the likeliest token first; at every step the token it lets
    through is the likeliest of those a second grammar, shown the same tokens, allows among the whole vocabulary.
    Compared on the same logits: two runs of llama.cpp on one prompt can differ by a tenth of a logit (where its
    cache put the tokens, how the prompt was split into batches), enough to turn a near tie such as "final"
    against "tool" after the haiku task, so two whole completions are not compared. The steps where the side
    (answer or call) may be taken against the likeliest token (agent.models.local_choice), an object kept
    open against it (agent.models.local_closing), a value kept a copy of the task's words against it
    (agent.models.local_copy), or an answer's quotation mark escaped (agent.models.local_quote), are only checked
    to be ones the grammar allows."""
    protocol = PromptProtocol(builtin_registry("."), constrain=True)
    grammar = gbnf(json.dumps(protocol.options["response_format"]["json_schema"]["schema"]))
    reference = CheckedGreedy(local_model.llama, grammar)  # used only to filter every candidate
    steps, shortcuts, against = [], 0, 0
    checked = CheckedGreedy.__call__

    def observed(self, input_ids, logits):
        nonlocal shortcuts, against
        def choices():  # how often each choice went against the likeliest token
            return self.choice.flipped, self.tool.taken, self.closing.kept, self.copy.copied, self.quote.escaped

        before = choices()
        result = checked(self, input_ids, logits.copy())
        chosen = int(result.argmax())
        shortcuts += chosen == int(logits.argmax())  # the likeliest token was allowed: nothing was filtered
        reference.seen = len(input_ids) if reference.seen is None else reference.seen
        for token in input_ids[reference.seen:]:
            reference.lib.llama_sampler_accept(reference.sampler, int(token))
        reference.seen = len(input_ids)
        allowed = reference._filtered(logits.copy())
        assert allowed[chosen] > -math.inf  # even a token taken by the choice of side is one the grammar allows
        if choices() == before:  # not against it
            steps.append((chosen, int(allowed.argmax())))
        else:
            against += 1
        return result

    monkeypatch.setattr(CheckedGreedy, "__call__", observed)
    messages = [{"role": "system", "content": protocol.system_prompt()}, {"role": "user", "content": task}]
    reply = local_model.complete(messages, max_tokens=120, **protocol.options)
    jsonschema.validate(json.loads(reply.content), protocol.options["response_format"]["json_schema"]["schema"])
    assert len(steps) + against >= reply.usage["completion_tokens"] > 0 and shortcuts > 0
    assert [a for a, _ in steps] == [b for _, b in steps]


def test_a_final_answers_quotation_marks_are_written_with_the_vocabularys_escaped_tokens(local_model):
    """The grammar arm's answer to BFCL's simple_python_225 ended at 'category =': the model's ' "' ended the JSON
    string. On the real vocabulary and grammar, fed that answer's start, the processor takes ' \\"' instead, and
    '\\"' for the mark that closes the quotation; a mark after a full stop still ends the answer."""
    import numpy as np

    llama = local_model.llama
    protocol = PromptProtocol(builtin_registry("."), constrain=True)
    schema = protocol.options["response_format"]["json_schema"]["schema"]
    token = {text: llama.tokenize(text.encode(), add_bos=False, special=False) for text in (' "', '"', ' \\"', '\\"')}
    assert all(len(ids) == 1 for ids in token.values())

    def taken(answer: str, likeliest: str) -> int:
        processor = CheckedGreedy(llama, gbnf(json.dumps(schema)), [{"role": "user", "content": "hi"}], schema)
        prompt = llama.tokenize(b"hi", add_bos=False, special=False)
        processor(prompt, np.zeros(llama.n_vocab(), dtype=np.single))  # the first call sees the prompt alone
        written = llama.tokenize(('{"type": "final", "answer": "' + answer).encode(), add_bos=False, special=False)
        logits = np.zeros(llama.n_vocab(), dtype=np.single)
        logits[token[likeliest][0]] = 10.0
        return int(processor(prompt + written, logits).argmax())

    assert taken("Call it with category =", ' "') == token[' \\"'][0]
    assert taken('Call it with category = \\"reading', '"') == token['\\"'][0]
    assert taken("That is all.", '"') == token['"'][0]


def test_a_calls_tool_is_the_one_its_spellings_together_make_likeliest(local_model):
    """BFCL's multiple_139 called calculate_binomial_probability ("calculate" 0.25) where "l", "laws" and "law"
    (lawsuit_details_find) held 0.31 between them. On the real vocabulary and grammar, fed a call's opening, with
    "calc" likeliest and two spellings of read_file's start just behind it, the processor takes read_file's
    likelier token; one spelling alone leaves "calc"."""
    import numpy as np

    llama = local_model.llama
    protocol = PromptProtocol(builtin_registry("."), constrain=True)
    schema = protocol.options["response_format"]["json_schema"]["schema"]
    token = {text: llama.tokenize(text.encode(), add_bos=False, special=False) for text in ("calc", "read", "re")}
    assert all(len(ids) == 1 for ids in token.values())

    def taken(probabilities: dict[str, float]) -> int:
        processor = CheckedGreedy(llama, gbnf(json.dumps(schema)), [{"role": "user", "content": "hi"}], schema)
        prompt = llama.tokenize(b"hi", add_bos=False, special=False)
        processor(prompt, np.zeros(llama.n_vocab(), dtype=np.single))  # the first call sees the prompt alone
        written = llama.tokenize(b'[{"type": "tool_call", "tool": "', add_bos=False, special=False)
        logits = np.full(llama.n_vocab(), -20.0, dtype=np.single)
        for text, probability in probabilities.items():
            logits[token[text][0]] = math.log(probability)
        return int(processor(prompt + written, logits).argmax())

    assert taken({"calc": 0.4, "read": 0.3, "re": 0.2}) == token["read"][0]
    assert taken({"calc": 0.4, "read": 0.3}) == token["calc"][0]


def test_a_completion_takes_its_openings_tokens_while_the_grammar_allows_them(local_model):
    """On the real vocabulary and grammar, a processor given an opening takes its tokens against the likeliest
    one; where the opening leaves what the grammar allows, it stops, and the likeliest allowed token is taken."""
    import numpy as np

    llama = local_model.llama
    protocol = PromptProtocol(builtin_registry("."), constrain=True)
    schema = protocol.options["response_format"]["json_schema"]["schema"]
    prompt = llama.tokenize(b"hi", add_bos=False, special=False)
    (bracket,), (key,) = (llama.tokenize(text, add_bos=False, special=False) for text in (b"[", b"type"))

    def taken(opening: str, written: str) -> str:
        processor = CheckedGreedy(llama, gbnf(json.dumps(schema)), [{"role": "user", "content": "hi"}], schema,
                                  opening)
        logits = np.full(llama.n_vocab(), -20.0, dtype=np.single)
        logits[bracket], logits[key] = 5.0, 0.0  # "[" likeliest at every step, then "type"
        processor(prompt, logits.copy())  # the first call sees the prompt alone
        so_far = llama.tokenize(written.encode(), add_bos=False, special=False) if written else []
        return llama.detokenize([int(processor(prompt + so_far, logits.copy()).argmax())]).decode()

    opening = '{"type": "tool_call", "tool": "'
    assert taken("", "") == "["
    assert taken(opening, "") == '{"'
    assert taken(opening, '{"type":') == ' "'
    assert taken('{"kind": "x"', '{"') == "type"  # the grammar wants "type" here: the opening is left


def test_a_batch_whose_first_call_is_not_one_calls_is_written_again_on_the_real_model(local_model):
    """Given, in reply to a sum, a batch that reads a file before calling the calculator, the model is asked for
    one call's tool (it names calculator), and the batch is written again from the calculator call; the usage
    counts every completion. Given a batch of two file reads, which holds no calculator call, it stands."""
    protocol = PromptProtocol(builtin_registry("."), constrain=True)
    messages = [{"role": "system", "content": protocol.system_prompt()},
                {"role": "user", "content": "Compute 128*96 + 45**2 - 88/2"}]
    _, request = local_model._request(messages, protocol.options)

    def looked_again(*calls: tuple[str, dict]) -> dict:
        batch = json.dumps([{"type": "tool_call", "tool": tool, "arguments": arguments} for tool, arguments in calls])
        response = {"choices": [{"message": {"content": batch}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 900, "completion_tokens": 40}}
        return local_model._first_call(messages, protocol.options, request, response)

    again = looked_again(("read_file", {"path": "a.txt"}), ("calculator", {"expression": "1+1"}))
    calls = json.loads(again["choices"][0]["message"]["content"])
    assert calls[0]["tool"] == "calculator"
    assert evaluate(calls[0]["arguments"]["expression"]) == 14269
    assert again["usage"]["completion_tokens"] > 40 + 10
    reads = looked_again(("read_file", {"path": "a.txt"}), ("read_file", {"path": "b.txt"}))
    assert json.loads(reads["choices"][0]["message"]["content"])[0]["tool"] == "read_file"
    assert reads["usage"]["completion_tokens"] > 40  # the question was asked


def test_a_constrained_value_outside_an_enum_is_written_out_and_reasked_with_the_value_it_meant(local_model):
    @tool(parameters={"type": "object", "required": ["unit"], "additionalProperties": False,
                      "properties": {"unit": {"type": "string", "enum": ["m", "mi", "km"]}}})
    def length(unit):
        """Convert a length."""
        return unit

    protocol = PromptProtocol(Registry([length]), constrain=True)  # calls are written as an array, as it shows
    written = '[{"type": "tool_call", "tool": "length", "arguments": {"unit": "miles"}}]'
    messages = [{"role": "system", "content": protocol.system_prompt()},
                {"role": "user", "content": f"Reply with exactly this text, character for character:\n{written}"}]
    reply = local_model.complete(messages, max_tokens=100, **protocol.options)
    assert reply.content.strip() == written  # a grammar held to the values could only stop at "m"
    assert 'did you mean "mi"?' in protocol.parse(reply).problem
    written = written.replace("miles", "litres")  # starts like no allowed value
    messages[1]["content"] = f"Reply with exactly this text, character for character:\n{written}"
    reply = local_model.complete(messages, max_tokens=100, **protocol.options)
    assert reply.content.strip() == written
    assert '"litres" is not one of' in protocol.parse(reply).problem


def test_native_mode_first_reply_is_a_tool_call(local_model):
    protocol = NativeProtocol(builtin_registry("."))
    messages = [{"role": "system", "content": protocol.system_prompt()},
                {"role": "user", "content": "Compute 128*96 + 45**2 - 88/2"}]
    reply = local_model.complete(messages, **protocol.options)
    assert reply.finish_reason == "tool_calls" and len(reply.tool_calls) == 1
    function = reply.tool_calls[0]["function"]
    assert function["name"] == "calculator"
    assert evaluate(json.loads(function["arguments"])["expression"]) == 14269


def test_calls_from_several_threads_take_turns(local_model):
    messages = [{"role": "user", "content": "Say hi."}]
    expected = local_model.complete(messages, max_tokens=4).content
    replies = []
    threads = [threading.Thread(target=lambda: replies.append(local_model.complete(messages, max_tokens=4).content))
               for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert replies == [expected] * 3


def test_a_conversation_longer_than_the_context_is_a_model_error(local_model):
    with pytest.raises(ModelError, match=r"no longer fits the local model's context \(8192 tokens\)"):
        local_model.complete([{"role": "user", "content": "word " * 9000}])


def test_the_readme_command_answers_with_no_endpoint_configured(local_model, tmp_path):
    """`agent "Compute 128*96 + 45**2 - 88/2"` with no key and no base URL runs the default embedded model."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AGENT_", "OPENAI_")) or k == "AGENT_CACHE_DIR"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)
    done = subprocess.run([sys.executable, "-m", "agent", "Compute 128*96 + 45**2 - 88/2"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "14269" in done.stdout and "calculator(" in done.stderr


@pytest.mark.parametrize("constrain", [True, False])
def test_a_streamed_reply_is_the_reply_complete_gives(local_model, constrain):
    protocol = PromptProtocol(builtin_registry("."), constrain=constrain)
    messages = [{"role": "system", "content": protocol.system_prompt()},
                {"role": "user", "content": "What is the capital of France? Answer in one sentence without a tool."}]
    whole = local_model.complete(messages, max_tokens=60, **protocol.options)
    pieces = []
    streamed = local_model.stream(messages, pieces.append, max_tokens=60, **protocol.options)
    assert len(pieces) > 3 and "".join(pieces) == streamed.content == whole.content
    assert (streamed.finish_reason, streamed.tool_calls) == (whole.finish_reason, whole.tool_calls)
    for kind in ("prompt_tokens", "completion_tokens"):
        assert abs(streamed.usage[kind] - whole.usage[kind]) <= 2, (streamed.usage, whole.usage)


def test_a_streamed_native_tool_call_is_assembled(local_model):
    protocol = NativeProtocol(builtin_registry("."))
    messages = [{"role": "system", "content": protocol.system_prompt()},
                {"role": "user", "content": "Compute 128*96 + 45**2 - 88/2"}]
    whole = local_model.complete(messages, **protocol.options)
    streamed = local_model.stream(messages, lambda text: None, **protocol.options)
    assert streamed.finish_reason == "tool_calls" and streamed.tool_calls == whole.tool_calls


CITY = {"type": "object", "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
        "required": ["city", "population"], "additionalProperties": False}


def test_the_grammar_holds_the_final_answer_to_an_output_schema():
    pytest.importorskip("llama_cpp")
    from llama_cpp.llama_grammar import LlamaGrammar

    protocol = PromptProtocol(builtin_registry("."), constrain=True, output_schema=CITY)
    grammar = gbnf(json.dumps(protocol.options["response_format"]["json_schema"]["schema"]))
    LlamaGrammar.from_string(grammar, verbose=False)
    rules = dict(line.split(" ::= ", 1) for line in grammar.splitlines() if " ::= " in line)
    answer = next(rule for name, rule in rules.items() if name.endswith("-answer-kv"))
    assert answer.startswith('"\\"answer\\"" space ":" space ')
    held_to = rules[answer.rsplit(" ", 1)[1]]  # the answer's value: the schema's object, not a string
    assert "city-kv" in held_to and "population-kv" in held_to


def test_a_constrained_answer_is_json_valid_against_the_output_schema(local_model, tmp_path):
    protocol = PromptProtocol(Registry(), constrain=True, output_schema=CITY)  # no tools: the answer at once
    result = run(local_model, protocol, "Name the capital of France and its population.", tmp_path, max_steps=1)
    assert result.status == "final" and result.reasks == 0
    jsonschema.validate(json.loads(result.answer), CITY)
