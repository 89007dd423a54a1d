"""`agent probe` against a real server in its three situations, the recommendation kept in the cache folder,
and `--protocol auto` using it."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.cli import main
from agent.evaluation.probe import MARKER
from tests.support import action, child_env

GOOD_CALL = [{"name": "multiply", "arguments": {"a": 17, "b": 23}}]
GOOD_JSON = json.dumps({"greeting": "Hello!", "marker": MARKER})


def endpoint(server) -> list[str]:
    return ["--base-url", server.url, "--model", "m"]


def cache_file() -> Path:
    return Path(os.environ["XDG_CACHE_HOME"]) / "prompt-protocol-agent" / "probes.json"


def native_works(server) -> None:
    server.refuse("response_format")
    server.reply(tool_calls=GOOD_CALL)


def only_response_format_works(server) -> None:
    server.refuse("tools")
    server.reply(GOOD_JSON)


def neither_works(server) -> None:
    server.refuse("tools")
    server.refuse("response_format")


@pytest.mark.parametrize("situation, native, constrained, arm", [
    (native_works, "yes  returned a well-formed tool call: multiply", "no   refused response_format (HTTP 400: "
     "Unrecognized request argument supplied: response_format)", "native"),
    (only_response_format_works, "no   refused tools (HTTP 400: Unrecognized request argument supplied: tools)",
     "yes  followed the JSON Schema of response_format", "prompt-constrained"),
    (neither_works, "no   refused tools", "no   refused response_format", "prompt"),
])
def test_probe_finds_what_the_endpoint_supports(server, capsys, situation, native, constrained, arm):
    situation(server)
    assert main(["probe", *endpoint(server)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("native tool calls (tools):") and native in out[0]
    assert out[1].startswith("constrained replies (json_schema):") and constrained in out[1]
    assert out[2].startswith(f"recommended arm: {arm} ")
    first, second, *other_form = (r["body"] for r in server.requests)
    assert first["tools"][0]["function"]["name"] == "multiply" and "response_format" not in first
    assert second["response_format"]["json_schema"]["schema"]["properties"]["marker"]["enum"] == [MARKER]
    # a refused json_schema is asked once more as llama-cpp-python's server writes it
    assert [body["response_format"]["type"] for body in other_form] == (["json_object"] if arm != "prompt-"
                                                                        "constrained" else [])
    assert json.loads(cache_file().read_text())[f"{server.url} m"]["arm"] == arm


@pytest.mark.parametrize("reply, found", [
    ({"content": "17 times 23 is 391."}, "accepted tools but answered in text: 17 times 23 is 391."),
    ({"tool_calls": [{"name": "add", "arguments": {"a": 1}}]}, "called an unknown tool add"),
    ({"tool_calls": [{"name": "multiply", "arguments": '{"a": 17'}]}, "returned malformed tool call arguments"),
    ({"tool_calls": [{"name": "multiply", "arguments": {"a": "x", "b": 2}}]}, "returned malformed tool call"),
])
def test_tool_calls_that_are_not_well_formed_do_not_count(server, capsys, reply, found):
    server.reply(reply.get("content"), tool_calls=reply.get("tool_calls"))
    server.reply('{"greeting": "hi"}')  # JSON, but not what the schema asks: response_format ignored
    assert main(["probe", "--json", *endpoint(server)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["native"] is False and result["native_detail"].startswith(found)
    assert result["constrained"] is False and result["arm"] == "prompt"
    assert result["constrained_detail"].startswith("accepted response_format but did not follow it")


def test_a_huge_reply_is_cut_short_in_the_report(server, capsys):
    server.reply("x" * 100_000)
    server.reply("\x1b[2J" + "y" * 100_000)
    assert main(["probe", *endpoint(server)]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) < 300 and "\x1b" not in out


def test_an_endpoint_that_does_not_answer_exits_3_and_keeps_nothing(server, capsys):
    server.error(401)
    assert main(["probe", *endpoint(server)]) == 3
    assert "wants an API key" in capsys.readouterr().err
    assert not cache_file().exists()
    assert main(["probe", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--timeout", "5"]) == 3


def test_a_server_error_on_a_feature_alone_is_that_feature_unsupported(server, capsys):
    """A server that answers any response_format with HTTP 500, in either form, but a plain request."""
    server.refuse("response_format", 500, "1 validation error: response_format: not supported")
    server.reply(tool_calls=GOOD_CALL)
    server.reply("Hi!")  # the plain request that tells a failing feature from a failing server
    assert main(["probe", "--json", *endpoint(server)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["native"], result["constrained"], result["arm"]) == (True, False, "native")
    assert result["constrained_detail"].startswith("failed on response_format but not on a plain request")
    assert "not supported" in result["constrained_detail"]
    assert "response_format" not in server.requests[-1]["body"]


def test_a_server_that_knows_only_llama_cpp_pythons_schema_form_is_asked_in_it(server, capsys):
    """llama-cpp-python's server answers {"type": "json_schema", ...} with HTTP 500 (a validation error) and
    holds a reply to {"type": "json_object", "schema": ...}."""
    server.refuse_when(lambda body: (body.get("response_format") or {}).get("type") == "json_schema", 500,
                       "1 validation error: response_format.type: Input should be 'text' or 'json_object'")
    server.reply(tool_calls=GOOD_CALL)
    server.reply(GOOD_JSON)
    assert main(["probe", "--json", *endpoint(server)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["constrained"], result["arm"]) == (True, "prompt-constrained")
    assert "sent as json_object with a schema" in result["constrained_detail"]
    sent = server.requests[-1]["body"]["response_format"]
    assert sent["type"] == "json_object" and sent["schema"]["properties"]["marker"]["enum"] == [MARKER]


def test_a_server_that_fails_plain_requests_too_is_down(server, capsys):
    server.refuse("messages", 500, "out of memory")
    assert main(["probe", *endpoint(server)]) == 3
    assert "HTTP 500" in capsys.readouterr().err and not cache_file().exists()


def test_the_local_model_needs_no_probe(capsys):
    assert main(["probe", "--local", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"backend": "local", "arm": "prompt-constrained"}


def test_protocol_auto_probes_once_then_uses_what_it_found(server, workspace, capsys):
    only_response_format_works(server)
    server.reply(action(answer="hi"))
    assert main(["--protocol", "auto", "--quiet", *endpoint(server), "say hi"]) == 0
    out, err = capsys.readouterr()
    assert out == "hi\n" and "using the prompt-constrained arm" in err
    run = server.requests[-1]["body"]
    assert run["response_format"]["json_schema"]["name"] == "action" and "tools" not in run

    server.reply(action(answer="again"))
    assert main(["--protocol", "auto", "--quiet", *endpoint(server), "say hi"]) == 0
    assert len(server.requests) == 4  # the two probes, then a run each: the finding was kept
    assert "probed" not in capsys.readouterr().err


def test_reprobe_asks_again_and_a_broken_cache_is_probed_afresh(server, workspace, capsys):
    cache_file().parent.mkdir(parents=True)
    cache_file().write_text("{not json")
    native_works(server)
    server.reply("done")
    assert main(["--protocol", "auto", "--quiet", *endpoint(server), "task"]) == 0
    assert "tools" in server.requests[-1]["body"] and "native" in capsys.readouterr().err
    server.reply(tool_calls=GOOD_CALL)
    server.reply("done again")
    assert main(["--protocol", "auto", "--reprobe", "--quiet", *endpoint(server), "task"]) == 0
    # each probe: tools, response_format in OpenAI's form and in llama-cpp-python's (both refused); then the run
    assert capsys.readouterr().out == "done again\n" and len(server.requests) == 8


def test_eval_with_protocol_auto_runs_the_recommended_arm_beside_others(server, workspace, capsys):
    neither_works(server)
    suite = workspace / "suite.jsonl"
    suite.write_text(json.dumps({"id": "t", "task": "2+2?", "checks": {"answer_number": 4}}) + "\n")
    server.reply(action(answer="4"))
    assert main(["eval", str(suite), "--protocol", "auto", "--quiet", *endpoint(server)]) == 0
    assert capsys.readouterr().out.splitlines()[0].split() == ["prompt"]


def test_protocol_auto_when_the_endpoint_is_down_exits_3(workspace, capsys):
    assert main(["--protocol", "auto", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--timeout", "5",
                 "task"]) == 3
    err = capsys.readouterr().err
    assert "cannot connect" in err and "Traceback" not in err


def test_chat_with_protocol_auto_keeps_its_session_in_the_protocol_found(server, workspace):
    native_works(server)
    server.reply("Hello!")
    done = subprocess.run([sys.executable, "-m", "agent", "chat", "--protocol", "auto", "--session", "s",
                           *endpoint(server)], input="hi\n", capture_output=True, text=True, env=child_env(),
                          cwd=workspace, timeout=60)
    assert (done.returncode, done.stdout) == (0, "Hello!\n"), done.stderr
    assert "(native protocol)" in done.stderr and "tools" in server.requests[-1]["body"]
    listed = subprocess.run([sys.executable, "-m", "agent", "sessions", "--json"], capture_output=True, text=True,
                            env=child_env(), cwd=workspace, timeout=60)
    assert json.loads(listed.stdout)[0]["protocol"] == "native"
