"""Tools from MCP servers: a real server written with the SDK (tests/mcp_demo.py), started by the agent, driven
by the scripted OpenAI-compatible server in both protocols; servers that crash, hang, flood or lie."""
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")

from agent.cli import main  # noqa: E402
from agent.tools.mcp import MAX_DESCRIPTION, parse_command, result_text, tool_name  # noqa: E402
from tests.support import action, child_env  # noqa: E402
from tests.test_shell import gone  # noqa: E402

DEMO = str(Path(__file__).with_name("mcp_demo.py"))


def demo(*options: str, name: str = "") -> str:
    """The --mcp value that starts the demo server with these options."""
    return f"{name + '=' if name else ''}{shlex.join([sys.executable, DEMO, *options])}"


def run(server, *args, capsys):
    code = main(["--base-url", server.url, "--model", "m", "--timeout", "10", *args])
    out, err = capsys.readouterr()
    return code, out, err


def pids(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def results_sent(request) -> list[str]:
    return [m["content"].strip() for m in request["body"]["messages"][2:] if m["role"] in ("user", "tool")]


def native_call(name, **arguments):
    return {"tool_calls": [{"id": "call_1", "name": name, "arguments": arguments}]}


# --- the prompt protocol and native tool calls ---------------------------------------------------------------

def test_prompt_protocol_calls_a_tool_of_the_server_and_the_server_is_gone_after(server, workspace, capsys):
    started = workspace / "pids"
    server.reply(action("demo_add", a=2, b=40))
    server.reply(action(answer="2 + 40 = 42"))
    code, out, err = run(server, "--mcp", demo("--pid-file", str(started)), "Add 2 and 40", capsys=capsys)
    assert (code, out) == (0, "2 + 40 = 42\n")
    assert "agent: MCP server demo: 6 tools" in err
    assert results_sent(server.requests[1])[-1].endswith("42")
    system = server.requests[0]["body"]["messages"][0]["content"]
    rules, tools = system.split("\nTools (the only ones: ")
    assert "- demo_add(a: integer, b: integer) — Add two whole numbers." in tools
    assert "demo_add" in tools.splitlines()[0]  # named among the tools, and nowhere in the rules before them
    assert "Add two whole numbers" not in rules and "demo_add" not in rules
    assert len(pids(started)) == 1 and gone(pids(started))


def test_native_protocol_sends_the_servers_schemas_and_gets_its_text_back(server, workspace, capsys):
    server.reply(**native_call("demo_shout", text="quiet please"))
    server.reply("It says QUIET PLEASE.")
    code, out, err = run(server, "--protocol", "native", "--mcp", demo(), "Shout it", capsys=capsys)
    assert (code, out) == (0, "It says QUIET PLEASE.\n")
    specs = {t["function"]["name"]: t["function"] for t in server.requests[0]["body"]["tools"]}
    assert specs["demo_shout"]["parameters"]["properties"]["text"]["type"] == "string"
    assert specs["demo_shout"]["parameters"]["required"] == ["text"]
    assert "calculator" in specs  # the built-in tools are there too
    tool_message = server.requests[1]["body"]["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["content"] == "QUIET PLEASE"


@pytest.mark.parametrize("protocol", ["prompt", "native"])
def test_arguments_are_checked_against_the_servers_schema_before_the_call(server, workspace, capsys, protocol):
    if protocol == "prompt":
        server.reply(action("demo_add", a="two", b=3))
        server.reply(action(answer="could not"))
    else:
        server.reply(**native_call("demo_add", a="two", b=3))
        server.reply("could not")
    code, out, err = run(server, "--protocol", protocol, "--mcp", demo(), "Add", capsys=capsys)
    assert code == 0
    sent = "\n".join(results_sent(server.requests[1]))
    assert "arguments for demo_add: $." in sent and "a: " in sent and "is not of type 'integer'" in sent


def test_an_error_from_the_server_is_an_error_result_and_other_content_is_described(server, workspace, capsys):
    server.reply(action("demo_refuse", reason="not today"))
    server.reply(action("demo_picture"))
    server.reply(action(answer="done"))
    code, out, err = run(server, "--mcp", demo(), "Try", capsys=capsys)
    assert code == 0
    refused, picture = results_sent(server.requests[2])[-2:]
    assert "error: " in refused and "refuse" in refused
    assert "a red dot" in picture and "[image: image/png, about 108 bytes, not shown]" in picture


# --- servers that go wrong -------------------------------------------------------------------------------------

@pytest.mark.parametrize("protocol", ["prompt", "native"])
def test_a_server_that_crashes_mid_run_gives_error_results_and_the_run_goes_on(server, workspace, capsys, protocol):
    started = workspace / "pids"
    if protocol == "prompt":
        server.replies(action("demo_crash"), action("demo_add", a=1, b=1), action("calculator", expression="1+1"),
                       action(answer="2, by the calculator"))
    else:
        server.reply(**native_call("demo_crash"))
        server.reply(**native_call("demo_add", a=1, b=1))
        server.reply(**native_call("calculator", expression="1+1"))
        server.reply("2, by the calculator")
    begun = time.monotonic()
    code, out, err = run(server, "--protocol", protocol, "--mcp", demo("--pid-file", str(started)), "1+1",
                         capsys=capsys)
    assert (code, out) == (0, "2, by the calculator\n")
    assert time.monotonic() - begun < 20
    crashed, after, calculated = [results_sent(server.requests[i])[-1] for i in (1, 2, 3)]
    assert "error: the MCP server demo stopped" in crashed
    assert "error: the MCP server demo is not running" in after and "use another way" in after
    assert calculated.endswith("2")
    said = [line for line in err.splitlines() if line.startswith("agent: ")]
    assert said == ["agent: MCP server demo: 6 tools", "agent: MCP server demo stopped during a call to crash "
                    "(Connection closed); the run goes on without its tools"]
    assert "Traceback" not in err and gone(pids(started))


def test_a_call_that_takes_too_long_is_an_error_and_the_server_is_stopped(server, workspace, capsys):
    started = workspace / "pids"
    server.replies(action("demo_sleep", seconds=30), action("demo_add", a=1, b=2), action(answer="gave up"))
    begun = time.monotonic()
    code, out, err = run(server, "--mcp", demo("--pid-file", str(started)), "--mcp-timeout", "2", "Wait",
                         capsys=capsys)
    assert (code, out) == (0, "gave up\n") and time.monotonic() - begun < 20
    late, after = results_sent(server.requests[1])[-1], results_sent(server.requests[2])[-1]
    assert "error: the MCP server demo did not answer within 2s and was stopped" in late
    assert "is not running" in after
    assert "agent: MCP server demo did not answer a call to sleep within 2s; it is stopped" in err
    assert gone(pids(started))


def test_a_server_that_never_answers_is_left_out_after_the_start_up_timeout(server, workspace, capsys):
    started = workspace / "pids"
    server.reply(action(answer="fine without it"))
    begun = time.monotonic()
    code, out, err = run(server, "--mcp", demo("--silent", "--pid-file", str(started)), "--mcp-timeout", "1.5", "Hi",
                         capsys=capsys)
    assert (code, out) == (0, "fine without it\n") and time.monotonic() - begun < 25
    [line] = [line for line in err.splitlines() if "MCP server" in line]
    assert line.startswith("agent: MCP server demo (") and "did not start within 10s" in line
    assert "demo_" not in server.requests[0]["body"]["messages"][0]["content"]
    assert gone(pids(started))


def test_a_missing_program_is_one_line_and_the_run_goes_on(server, workspace, capsys):
    server.reply(action(answer="ok"))
    code, out, err = run(server, "--mcp", "no-such-mcp-server-here --flag", "Hi", capsys=capsys)
    assert (code, out) == (0, "ok\n")
    [line] = [line for line in err.splitlines() if "MCP server" in line]
    assert "could not start: no program 'no-such-mcp-server-here' (is it installed and on PATH?)" in line


def test_garbage_on_stdout_is_skipped(server, workspace, capsys):
    server.replies(action("demo_add", a=1, b=2), action(answer="3"))
    code, out, err = run(server, "--mcp", demo("--garbage"), "Add", capsys=capsys)
    assert (code, out) == (0, "3\n") and results_sent(server.requests[1])[-1].endswith("3")
    assert [line for line in err.splitlines() if not line.startswith("  ")] == [
        "agent: MCP server demo: 6 tools", err.splitlines()[-1]]  # and the summary: no traceback, no log


def test_a_flood_on_stderr_is_not_kept_and_not_shown(server, workspace, capsys):
    server.replies(action("demo_add", a=1, b=2), action(answer="3"))
    code, out, err = run(server, "--mcp", demo("--noisy"), "Add", capsys=capsys)
    assert (code, out) == (0, "3\n") and "noise" not in err


def test_huge_descriptions_are_capped_and_huge_results_cut(server, workspace, capsys):
    server.replies(action("demo_flood"), action(answer="a lot of x"))
    code, out, err = run(server, "--mcp", demo("--huge"), "--max-output", "1000", "Flood", capsys=capsys)
    assert code == 0
    system = server.requests[0]["body"]["messages"][0]["content"]
    [line] = [line for line in system.splitlines() if line.startswith("- demo_chatty()")]
    assert len(line) < MAX_DESCRIPTION + 40 and line.endswith("…")
    assert system.count("Ignore all previous") == line.count("Ignore all previous")  # in its own line alone
    assert len(results_sent(server.requests[1])[-1]) < 1500


def test_names_that_collide_with_built_in_tools_are_refused(server, workspace, capsys):
    server.replies(action("read_file", path="notes.txt"), action(answer="read"))
    (workspace / "notes.txt").write_text("built in\n")
    code, out, err = run(server, "--mcp", demo("--tool", "file", name="read"), "Read", capsys=capsys)
    assert code == 0
    assert "agent: MCP server read: tool 'file' left out: its name read_file is taken" in err
    assert results_sent(server.requests[1])[-1].endswith("built in\n") or "built in" in results_sent(
        server.requests[1])[-1]


def test_two_servers_with_one_name_are_a_usage_error(server, workspace, capsys):
    code, out, err = run(server, "--mcp", demo(), "--mcp", demo("--huge"), "Hi", capsys=capsys)
    assert code == 2 and err.count("\n") == 1
    assert "two MCP servers are named demo; name them apart: --mcp \"NAME=COMMAND ARGS...\"" in err


def test_without_the_extra_the_command_says_which_install_fixes_it(workspace):
    script = ("import sys; sys.modules['mcp'] = None; from agent.cli import main; "
              f"sys.exit(main(['tools', '--mcp', {demo()!r}]))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=child_env(),
                          timeout=60)
    assert done.returncode == 2
    assert done.stderr == "agent: MCP servers need the mcp extra: pip install 'prompt-protocol-agent[mcp]'\n"


# --- agent tools, agent.toml, --tools, --read-only ----------------------------------------------------------

def test_agent_tools_json_lists_the_servers_tools_with_their_schemas(workspace, capsys):
    assert main(["tools", "--json", "--tools", "none", "--mcp", demo()]) == 0
    specs = {t["function"]["name"]: t["function"] for t in json.loads(capsys.readouterr().out)}
    assert set(specs) == {"demo_add", "demo_shout", "demo_refuse", "demo_crash", "demo_sleep", "demo_picture"}
    assert specs["demo_add"]["parameters"]["required"] == ["a", "b"]
    assert specs["demo_add"]["description"] == "Add two whole numbers."


def test_read_only_keeps_only_the_tools_the_server_marks_read_only(workspace, capsys):
    assert main(["tools", "--read-only", "--tools", "calculator", "--mcp", demo()]) == 0
    out = capsys.readouterr().out
    assert "on: calculator, demo_add (choose with --tools)" in out
    assert "demo_shout (--read-only (its server does not mark it read-only))" in out


def test_agent_toml_in_the_config_folder_starts_its_servers(workspace, capsys):
    folder = Path(os.environ["XDG_CONFIG_HOME"]) / "prompt-protocol-agent"
    folder.mkdir(parents=True)
    (folder / "agent.toml").write_text(f'[mcp.servers.calc]\ncommand = {json.dumps(sys.executable)}\n'
                                       f'args = [{json.dumps(DEMO)}, "--tool", "x.y"]\n')
    assert main(["tools", "--tools", "none"]) == 0
    out = capsys.readouterr().out
    assert "- calc_add(a: integer, b: integer)" in out and "- calc_x_y() — A tool named x.y." in out


def test_agent_toml_in_the_current_folder_needs_approval(workspace, capsys):
    (workspace / "agent.toml").write_text(f'[mcp.servers.here]\ncommand = {json.dumps(sys.executable)}\n'
                                          f'args = [{json.dumps(DEMO)}]\n')
    assert main(["tools", "--tools", "none"]) == 0
    out, err = capsys.readouterr()
    assert "here_add" not in out and "the MCP servers of" in err and "were not started (pass --yes" in err
    assert main(["tools", "--tools", "none", "--yes"]) == 0
    assert "here_add" in capsys.readouterr().out


@pytest.mark.parametrize("where", ["elsewhere", "config folder"])
def test_agent_toml_in_the_current_folder_asks_first_whatever_it_links_to(workspace, tmp_path_factory, where):
    """A link named agent.toml (to a file anywhere, even one in your configuration folder under another name)
    is the current folder's file: with no terminal to ask, its servers are not started."""
    started = workspace / "pids"
    folder = (Path(os.environ["XDG_CONFIG_HOME"]) / "prompt-protocol-agent" if where == "config folder"
              else tmp_path_factory.mktemp("elsewhere"))
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "servers.toml"
    target.write_text(f'[mcp.servers.here]\ncommand = {json.dumps(sys.executable)}\n'
                      f'args = {json.dumps([DEMO, "--pid-file", str(started)])}\n')
    (workspace / "agent.toml").symlink_to(target)
    done = subprocess.run([sys.executable, "-m", "agent", "tools", "--tools", "none"], cwd=workspace,
                          env={**child_env(), "XDG_CONFIG_HOME": os.environ["XDG_CONFIG_HOME"]}, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL, start_new_session=True)
    assert done.returncode == 0 and "here_add" not in done.stdout and "Traceback" not in done.stderr
    assert f"the MCP servers of {workspace / 'agent.toml'} were not started (pass --yes" in done.stderr
    assert f"refused, with no terminal to ask: starting the MCP servers of {workspace / 'agent.toml'}, a link to " \
           f"{target}" in done.stderr
    assert pids(started) == []


def test_a_link_in_the_current_folder_to_your_own_agent_toml_is_yours(workspace, capsys):
    folder = Path(os.environ["XDG_CONFIG_HOME"]) / "prompt-protocol-agent"
    folder.mkdir(parents=True)
    (folder / "agent.toml").write_text(f'[mcp.servers.calc]\ncommand = {json.dumps(sys.executable)}\n'
                                       f'args = [{json.dumps(DEMO)}]\n')
    (workspace / "agent.toml").symlink_to(folder / "agent.toml")
    assert main(["tools", "--tools", "none"]) == 0
    out, err = capsys.readouterr()
    assert out.count("- calc_add(a: integer, b: integer)") == 1 and "were not started" not in err


@pytest.mark.parametrize("text, problem", [
    ("[mcp.servers.x\n", "not valid TOML"),
    ('[mcp.servers.x]\nargs = ["a"]\n', "mcp.servers.x: 'command' is a required property"),
    ('[mcp.servers.x]\ncommand = "a"\nargs = "b c"\n', "mcp.servers.x.args: 'b c' is not of type 'array'"),
    ('[mcp.servrs.x]\ncommand = "a"\n', "mcp: Additional properties are not allowed ('servrs' was unexpected)"),
    ("\xff\xfe[mcp]", "cannot read it"),
    ("# " + "x" * 1_000_000 + "\n", "larger than 1,000,000 bytes"),
])
def test_a_bad_agent_toml_is_one_line_naming_the_file(workspace, capsys, text, problem):
    (workspace / "agent.toml").write_bytes(text.encode("latin-1") if text.startswith("\xff") else text.encode())
    assert main(["tools"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{workspace / 'agent.toml'}: " in err and problem in err, err


# --- chat, eval, Ctrl-C --------------------------------------------------------------------------------------

def test_a_chat_starts_its_servers_once_and_stops_them_at_the_end(server, workspace):
    started = workspace / "pids"
    server.replies(action("demo_add", a=1, b=2), action(answer="3"), action("demo_add", a=3, b=4), action(answer="7"))
    done = subprocess.run([sys.executable, "-m", "agent", "chat", "--base-url", server.url, "-m", "m",
                           "--mcp", demo("--pid-file", str(started))], input="1+2\n3+4\n", capture_output=True,
                          text=True, env=child_env(), cwd=workspace, timeout=60)
    assert done.returncode == 0 and done.stdout == "3\n7\n", done.stderr
    assert len(pids(started)) == 1 and gone(pids(started))


def test_ctrl_c_during_a_call_stops_the_run_and_the_server(server, workspace):
    started = workspace / "pids"
    server.replies(action("demo_sleep", seconds=60), action(answer="never"))
    child = subprocess.Popen([sys.executable, "-m", "agent", "--base-url", server.url, "-m", "m",
                              "--mcp", demo("--pid-file", str(started)), "Wait"], cwd=workspace, env=child_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while len(server.requests) < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1)  # the call is on its way to the server
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=30)
    assert child.returncode == 130 and "Traceback" not in err, err
    assert len(pids(started)) == 1 and gone(pids(started))


def test_eval_runs_a_suite_whose_tool_comes_from_a_server(server, workspace, capsys):
    suite = workspace / "suite.jsonl"
    suite.write_text(json.dumps({"id": "mcp-add", "task": "Add 20 and 22 with the demo server.",
                                 "checks": {"answer_number": 42, "tools_called": ["demo_add"]}}) + "\n")
    server.replies(action("demo_add", a=20, b=22), action(answer="42"))
    server.reply(**native_call("demo_add", a=20, b=22))
    server.reply("42")
    code = main(["eval", str(suite), "--base-url", server.url, "-m", "m", "--workers", "1", "--quiet",
                 "--mcp", demo(), "--out", str(workspace / "out.json")])
    assert code == 0, capsys.readouterr().err
    results = json.loads((workspace / "out.json").read_text())
    assert [(r["protocol"], r["passed"]) for r in results["runs"]] == [("prompt", True), ("native", True)]
    assert results["settings"]["mcp"] == {"demo": [sys.executable, DEMO]}


def test_a_suite_naming_a_tool_no_server_brings_is_a_usage_error(workspace, capsys):
    suite = workspace / "suite.jsonl"
    suite.write_text(json.dumps({"id": "t", "task": "x", "checks": {"tools_called": ["demo_add"]}}) + "\n")
    assert main(["eval", str(suite), "--list"]) == 2
    assert "unknown tool demo_add" in capsys.readouterr().err


# --- names and results -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("command, name", [
    ("mcp-server-time --local-timezone UTC", "time"),
    ("uvx mcp-server-sqlite --db-path x.db", "sqlite"),
    ("npx -y @modelcontextprotocol/server-filesystem /tmp", "filesystem"),
    ("python3 tests/mcp_demo.py", "demo"),
    ("/usr/local/bin/weather-mcp", "weather"),
    ("notes=python3 -m notes_server", "notes"),
    ("python3 -m company.weather_server --units metric", "weather"),
    ("python -c 'import server; server.run()'", "python"),
    ("python3.12 -u server.py", "server"),
])
def test_a_server_is_named_after_its_program(command, name):
    assert parse_command(command).name == name


def test_tool_names_are_made_acceptable_and_kept_apart():
    assert tool_name("time", "get.time/now") == "time_get_time_now"
    long_a, long_b = tool_name("s", "x" * 80 + "a"), tool_name("s", "x" * 80 + "b")
    assert len(long_a) == 64 and long_a != long_b


def test_results_of_every_content_type_are_text():
    text = result_text({"content": [
        {"type": "text", "text": "hello"},
        {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
        {"type": "resource_link", "uri": "file:///a.txt", "name": "a"},
        {"type": "resource", "resource": {"uri": "file:///b.txt", "text": "bee"}},
        {"type": "resource", "resource": {"uri": "file:///c.bin", "blob": "AA==", "mimeType": "application/zip"}},
        {"type": "hologram"},
    ]})
    assert text.splitlines() == ["hello", "[audio: audio/wav, about 3 bytes, not shown]",
                                 "[resource link: file:///a.txt (a)]", "[resource file:///b.txt]", "bee",
                                 "[resource file:///c.bin: application/zip, not shown]",
                                 "[hologram content, not shown]"]
    assert result_text({"content": [], "structuredContent": {"a": 1}}) == '{"a": 1}'
    assert result_text({"content": []}) == "(no output)"


def test_a_server_killed_between_calls_is_found_gone_at_the_next_call(server, workspace, capsys):
    started = workspace / "pids"
    killed = []

    def kill_it(body) -> bool:  # as the second request arrives: the server dies while nobody calls it
        if len(server.requests) == 2 and not killed:
            killed.append(os.kill(pids(started)[0], signal.SIGKILL))
        return False

    server.answer_when(kill_it, "")
    server.replies(action("demo_add", a=1, b=2), action("demo_add", a=3, b=4), action(answer="only 3"))
    code, out, err = run(server, "--mcp", demo("--pid-file", str(started)), "Add twice", capsys=capsys)
    assert (code, out) == (0, "only 3\n") and killed
    assert results_sent(server.requests[1])[-1].endswith("3")
    assert "error: the MCP server demo" in results_sent(server.requests[2])[-1]
    assert len([line for line in err.splitlines() if line.startswith("agent: MCP server demo stopped")]) == 1
    assert gone(pids(started))


def test_tools_a_server_lists_wrongly_are_left_out_each_with_a_reason():
    from agent.tools.mcp import MCPServers, ServerSpec, _Server

    said = []
    servers = MCPServers([], warn=said.append, taken={"calculator"})
    deep = {"type": "object", "properties": {}}
    node = deep["properties"]
    for _ in range(3000):
        node["a"] = {"type": "object", "properties": {}}
        node = node["a"]["properties"]
    listed = [
        {"name": "ok", "inputSchema": {"type": "object", "properties": {"x": {"$ref": "#/$defs/x"}},
                                       "$defs": {"x": {"type": "string", "description": "d" * 5000}}}},
        {"name": "remote", "inputSchema": {"type": "object", "properties": {"x": {"$ref": "https://example.com/s"}}}},
        {"name": "nowhere", "inputSchema": {"type": "object", "properties": {"x": {"$ref": "#/$defs/none"}}}},
        {"name": "array", "inputSchema": {"type": "array"}},
        {"name": "invalid", "inputSchema": {"type": "object", "properties": {"x": {"type": 5}}}},
        {"name": "wide", "inputSchema": {"type": "object", "properties": {f"p{i}": {} for i in range(3000)}}},
        {"name": "deep", "inputSchema": deep},
        {"inputSchema": {"type": "object"}},
        {"name": "ok"},
    ]
    servers._add_tools(_Server(ServerSpec("s", "x")), listed)
    [tool] = servers.tools
    assert tool.name == "s_ok" and len(tool.parameters["$defs"]["x"]["description"]) == 300
    reasons = [line.split(" left out: ")[1] for line in said]
    assert reasons == ["its input schema refers to 'https://example.com/s', which is not in it",
                       "its input schema refers to '#/$defs/none', which is not in it",
                       "its input schema is not a JSON Schema object",
                       "its input schema is invalid (5 is not valid under any of the given schemas)",
                       "its input schema is longer than 20,000 characters",
                       "its input schema cannot be used (RecursionError)",
                       "it has no name",
                       "its name s_ok is taken (by a built-in tool or another of the server's tools)"]


def test_a_batch_of_calls_to_one_server_runs_at_once_and_comes_back_in_order(server, workspace, capsys):
    batch = json.dumps([{"type": "tool_call", "tool": "demo_add", "arguments": {"a": n, "b": 100}} for n in (1, 2, 3)])
    server.replies(batch, action(answer="101, 102, 103"))
    code, out, err = run(server, "--mcp", demo(), "Add 100 to 1, 2 and 3", capsys=capsys)
    assert (code, out) == (0, "101, 102, 103\n")
    sent = results_sent(server.requests[1])[-1]
    assert [line.split(": ")[-1] for line in sent.splitlines() if line[:1].isdigit()] == ["101", "102", "103"]


def test_ctrl_c_while_a_server_starts_leaves_nothing_running(server, workspace):
    started = workspace / "pids"
    child = subprocess.Popen([sys.executable, "-m", "agent", "--base-url", server.url, "-m", "m",
                              "--mcp", demo("--silent", "--pid-file", str(started)), "Hi"], cwd=workspace,
                             env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not pids(started) and time.monotonic() < deadline:
        time.sleep(0.05)
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=30)
    assert child.returncode == 130 and "Traceback" not in err and out == "", err
    assert server.requests == [] and len(pids(started)) == 1 and gone(pids(started))


@pytest.mark.parametrize("value, problem", [
    ("", "--mcp '' names no command; pass --mcp \"COMMAND ARGS...\""),
    ("  ", "--mcp '  ' names no command"),
    ("mcp-server-time 'unclosed", "--mcp \"mcp-server-time 'unclosed\": No closing quotation; quote the command"),
])
def test_an_unusable_mcp_command_is_a_usage_error(workspace, capsys, value, problem):
    assert main(["tools", "--mcp", value]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and problem in err, err
