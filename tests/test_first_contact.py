"""What a newcomer meets first: commands, piped input, the OpenAI key, errors that say what to do, --system."""
import io
import os
import pty
import select
import subprocess
import sys
import time

import pytest

from agent.cli import main, split_command
from agent.cli.display import Heartbeat
from agent.config import OPENAI_DEFAULT_MODEL, resolve_endpoint
from agent.models import Reply
from tests.support import action, child_env


def agent(*args, stdin=None, env=None, cwd=None, **extra):
    return subprocess.run([sys.executable, "-m", "agent", *args], stdin=stdin, capture_output=True, text=True,
                          env=env or child_env(), cwd=cwd, timeout=60, **extra)


def user_task(server, index=0) -> str:
    return next(m["content"] for m in server.requests[index]["body"]["messages"] if m["role"] == "user")


def test_an_exported_openai_key_uses_openai_with_a_default_model_and_says_so():
    endpoint = resolve_endpoint({"OPENAI_API_KEY": "sk-x"})
    assert (endpoint.model, endpoint.base_url, endpoint.chosen_by) == (OPENAI_DEFAULT_MODEL, None, "OPENAI_API_KEY")
    assert "OPENAI_API_KEY" in endpoint.note and "--local" in endpoint.note
    assert resolve_endpoint({"OPENAI_API_KEY": "sk-x"}, model="gpt-4o").note is None
    assert resolve_endpoint({"OPENAI_API_KEY": "sk-x"}, api_key="k").chosen_by is None  # a flag chose it


def test_a_base_url_from_the_environment_without_a_model_names_the_variable_and_local(workspace):
    done = agent("Compute 1+1", env=child_env(OPENAI_BASE_URL="http://127.0.0.1:9/v1", OPENAI_API_KEY="sk-x"),
                 cwd=workspace)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "OPENAI_BASE_URL is set" in done.stderr and "--local" in done.stderr


def test_an_unreachable_endpoint_chosen_by_a_variable_suggests_local(workspace):
    done = agent("-m", "m", "--timeout", "2", "Compute 1+1", cwd=workspace,
                 env=child_env(OPENAI_BASE_URL="http://127.0.0.1:9/v1"))
    assert done.returncode == 3
    assert done.stderr.splitlines()[-1] == ("agent: the endpoint was chosen because OPENAI_BASE_URL is set; "
                                            "pass --local to use the embedded model instead")


@pytest.mark.parametrize("argv, command, rest", [
    (["tools"], "tools", []),
    (["--quiet", "tools", "--json"], "tools", ["--quiet", "--json"]),
    (["--model", "tools", "eval"], "eval", ["--model", "tools"]),  # an option's value is not a command
    (["--", "tools"], None, ["--", "tools"]),
    (["what", "tools", "exist?"], None, ["what", "tools", "exist?"]),
    (["help"], "help", []),
])
def test_a_command_is_the_first_word_that_is_not_an_option(argv, command, rest):
    assert split_command(argv) == (command, rest)


def test_help_version_and_a_task_named_like_a_command(server, workspace, capsys):
    with pytest.raises(SystemExit) as shown:
        main(["help"])
    assert shown.value.code == 0 and "agent -- tools" in capsys.readouterr().out
    with pytest.raises(SystemExit) as shown:
        main(["--version"])
    assert shown.value.code == 0 and capsys.readouterr().out.startswith("agent ")
    assert main(["--quiet", "tools"]) == 0 and "calculator(expression" in capsys.readouterr().out
    server.reply(action(answer="These: calculator, ..."))
    assert main(["--base-url", server.url, "-m", "m", "--quiet", "--", "tools"]) == 0
    assert user_task(server) == "tools" and server.requests[0]["body"]["model"] == "m"
    assert server.requests and len(server.requests) == 1  # `help` and `tools` above made no model call


def test_the_task_can_be_piped_in_or_added_to(server, workspace):
    server.replies(action(answer="4"), action(answer="2 errors"), action(answer="ok"))
    done = agent("--base-url", server.url, "-m", "m", "--quiet", stdin=None, input="What is 2+2?\n", cwd=workspace)
    assert (done.returncode, done.stdout) == (0, "4\n") and user_task(server, 0) == "What is 2+2?"
    done = agent("--base-url", server.url, "-m", "m", "--quiet", "Summarise the errors", stdin=None,
                 input="ERROR disk full\nERROR timeout\n", cwd=workspace)
    assert done.returncode == 0
    assert user_task(server, 1) == "Summarise the errors\n\nInput:\nERROR disk full\nERROR timeout"
    done = agent("--base-url", server.url, "-m", "m", "--quiet", "-", stdin=None, input="hello", cwd=workspace)
    assert done.returncode == 0 and user_task(server, 2) == "hello"


def test_piped_input_over_the_cap_or_no_task_at_all_is_a_usage_error(workspace):
    done = agent("--base-url", "http://127.0.0.1:9/v1", "-m", "m", "sum up", stdin=None, input="x" * 200_001,
                 cwd=workspace)
    assert done.returncode == 2 and "longer than 200,000 characters" in done.stderr and done.stderr.count("\n") == 1
    done = agent("--base-url", "http://127.0.0.1:9/v1", "-m", "m", cwd=workspace)  # stdin is /dev/null
    assert done.returncode == 2 and done.stderr.startswith("agent: no task;") and done.stderr.count("\n") == 1


def test_a_misspelt_flag_is_one_line_with_a_suggestion(workspace):
    done = agent("--modle", "m", "task", cwd=workspace)
    assert done.returncode == 2
    assert done.stderr == "agent: unrecognized arguments: --modle; did you mean --model? (see agent --help)\n"


def test_a_closed_pipe_ends_quietly(workspace):
    done = subprocess.run(f"{sys.executable} -m agent tools --json | head -c 10", shell=True, capture_output=True,
                          text=True, env=child_env(), cwd=workspace, timeout=60, stdin=subprocess.DEVNULL)
    assert done.stdout == "[\n  {\n    " and done.stderr == ""


@pytest.mark.parametrize("status, base, expected", [
    (404, "without /v1", "most servers serve the API under /v1: try --base-url http://127.0.0.1:"),
    (401, "with a key", "rejected the API key (HTTP 401: bad key); check that the key is right"),
    (503, "", "the server is down or overloaded: try again later"),
])
def test_endpoint_errors_say_what_to_do(server, workspace, capsys, status, base, expected):
    for _ in range(3):
        server.error(status, body={"error": {"message": "bad key" if status == 401 else "nope"}})
    url = server.url[:-3] if base == "without /v1" else server.url
    key = ["--api-key", "k"] if status == 401 else []
    assert main(["--base-url", url, "-m", "m", "--timeout", "5", *key, "x"]) == 3
    err = capsys.readouterr().err
    assert expected in err and "pass --api-key" not in err


def test_models_lists_what_the_endpoint_serves_and_the_built_in_ones(server, workspace, capsys):
    assert main(["models", "--base-url", server.url]) == 0
    assert capsys.readouterr().out == "scripted\n"
    assert main(["models", "--local"]) == 0
    assert "coder-1.5b\tQwen2.5-Coder-1.5B-Instruct (Q4_K_M) (default)" in capsys.readouterr().out


def test_system_adds_the_users_instructions_after_the_protocol(server, workspace, capsys):
    server.reply(action(answer="Ahoy"))
    assert main(["--base-url", server.url, "-m", "m", "--quiet", "-s", "Answer like a pirate.", "hi"]) == 0
    system = server.requests[0]["body"]["messages"][0]["content"]
    assert system.index("Every reply you write") < system.index("Instructions from the user:\nAnswer like a pirate.")


def test_eval_lists_its_tasks_and_fails_below_min_pass(server, workspace, capsys):
    assert main(["eval", "--list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert len(listed) == 33 and listed[0].count("\t") == 2
    server.replies(*[action(answer="no idea")] * 2)
    args = ["eval", "--base-url", server.url, "-m", "m", "--protocol", "prompt", "--limit", "1", "--quiet"]
    assert main([*args, "--min-pass", "50"]) == 4
    assert "below --min-pass 50%: prompt passed 0.0%" in capsys.readouterr().err
    assert main([*args, "--min-pass", "0"]) == 0


class Slow:
    def complete(self, messages, **options):
        time.sleep(0.35)
        return Reply(content="done")


def test_heartbeat_counts_the_wait_and_erases_itself():
    stream = io.StringIO()
    assert Heartbeat(Slow(), stream, every=0.1).complete([]).content == "done"
    shown = stream.getvalue()
    assert "\r  waiting for the model… 0s" in shown and shown.endswith("\r\033[K")


def test_heartbeat_shows_on_a_terminal_only(server, workspace):
    server.reply(action(answer="4"), delay=1.6)
    leader, follower = pty.openpty()
    child = subprocess.Popen([sys.executable, "-m", "agent", "--base-url", server.url, "-m", "m", "2+2?"],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=follower, env=child_env(),
                             cwd=workspace)
    os.close(follower)
    seen = b""
    while child.poll() is None or select.select([leader], [], [], 0.1)[0]:
        if select.select([leader], [], [], 0.1)[0]:
            try:
                seen += os.read(leader, 4096)
            except OSError:
                break
    os.close(leader)
    assert child.wait(timeout=30) == 0 and child.stdout.read() == b"4\n"
    assert b"waiting for the model" in seen
    server.reply(action(answer="4"), delay=1.6)  # stderr not a terminal: no heartbeat
    done = agent("--base-url", server.url, "-m", "m", "2+2?", cwd=workspace)
    assert done.returncode == 0 and "waiting" not in done.stderr


def test_keys_set_stores_the_key_for_the_user_only_and_runs_from_any_folder_use_it(server, workspace, capsys):
    config = workspace / "home-config"
    env = child_env(XDG_CONFIG_HOME=str(config))
    shown = agent("config", "path", env=env, cwd=workspace)
    path = config / "prompt-protocol-agent" / "config.env"
    assert (shown.returncode, shown.stdout) == (0, f"{path}\n")
    assert agent("keys", "set", "agent", stdin=None, input="old\n", env=env, cwd=workspace).returncode == 0
    assert (path.stat().st_mode & 0o777, path.parent.stat().st_mode & 0o777) == (0o600, 0o700)
    path.write_text(f"# mine\nAGENT_BASE_URL={server.url}\nAGENT_MODEL=from-config\nAGENT_API_KEY=old\n")
    done = agent("keys", "set", "agent", stdin=None, input="sk-new\n", env=env, cwd=workspace)
    assert done.returncode == 0 and "sk-new" not in done.stderr + done.stdout
    assert path.read_text() == f"# mine\nAGENT_BASE_URL={server.url}\nAGENT_MODEL=from-config\nAGENT_API_KEY=sk-new\n"
    assert path.stat().st_mode & 0o777 == 0o600
    sub = workspace / "a" / "b"
    sub.mkdir(parents=True)
    server.reply(action(answer="hi"))
    done = agent("--quiet", "hello", env=env, cwd=sub)
    assert (done.returncode, done.stdout) == (0, "hi\n")
    assert server.requests[0]["body"]["model"] == "from-config"
    assert server.requests[0]["headers"]["authorization"] == "Bearer sk-new"


def test_a_dotenv_base_url_never_receives_the_key_from_the_users_file(server, workspace):
    config = workspace / "home-config"
    (config / "prompt-protocol-agent").mkdir(parents=True)
    (config / "prompt-protocol-agent" / "config.env").write_text("OPENAI_API_KEY=sk-mine\n")
    (workspace / ".env").write_text(f"AGENT_BASE_URL={server.url}\nAGENT_MODEL=m\n")
    server.reply(action(answer="hi"))
    done = agent("hello", env=child_env(XDG_CONFIG_HOME=str(config)), cwd=workspace)
    assert done.returncode == 0 and "is not sent to" in done.stderr
    assert "authorization" not in server.requests[0]["headers"] or "sk-mine" not in server.requests[0]["headers"]["authorization"]


def test_keys_set_refuses_an_empty_or_unsendable_key(workspace):
    for typed in ("\n", "sk bad\n"):
        done = agent("keys", "set", "openai", stdin=None, input=typed, cwd=workspace)
        assert done.returncode == 2 and done.stderr.count("\n") == 1


@pytest.mark.parametrize("line, expected, absent", [
    ("agent --mo", {"--model", "--model-path"}, "--json"),
    ("agent eval --mi", {"--min-pass"}, "--system"),
    ("agent tools --", {"--json", "--help"}, "--quiet"),
    ("agent t", {"tools"}, "eval"),
])
def test_bash_completion_is_generated_from_the_parsers(tmp_path, line, expected, absent):
    script = tmp_path / "agent.bash"
    script.write_text(agent("completion", "bash").stdout)
    words = line.split(" ")
    probe = (f'source {script}; COMP_WORDS=({" ".join(words)}); COMP_CWORD={len(words) - 1}; _agent; '
             'printf "%s\\n" "${COMPREPLY[@]}"')
    offered = set(subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30).stdout.split())
    assert expected <= offered and absent not in offered
