"""The README's code does what the README says, and so does the code of the pages in docs/: their Python
snippets run, and their shown commands that need no model print what is shown."""
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from dotenv import dotenv_values

from tests.support import action, child_env

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
PAGES = [README] + [page.read_text(encoding="utf-8") for page in sorted((ROOT / "docs").glob("*.md"))]
BLOCKS = [block for page in PAGES for block in re.findall(r"^```(\w*)\n(.*?)^```", page, re.S | re.M)]
PYTHON = [code for kind, code in BLOCKS if kind == "python"]
# shown runs that need no model: a command, then exactly what it prints
SHOWN = [code for kind, code in BLOCKS if kind == "" and code.startswith("$ agent ") and code.count("$ ") == 1
         and " · " not in code and "eval" not in code.splitlines()[0] and not code.startswith("$ agent probe")
         and "--local" not in code.splitlines()[0]]
# `agent probe` shown against an endpoint in one of its situations, which the scripted server plays
PROBES = [code for kind, code in BLOCKS if kind == "" and code.startswith("$ agent probe --base-url ")]


def test_the_readme_has_the_snippets_this_file_checks():
    assert len(PYTHON) >= 1 and len(SHOWN) >= 2


@pytest.mark.parametrize("code", PYTHON)
def test_python_snippets_run_against_a_scripted_server(code, server, tmp_path):
    assert "http://localhost:11434/v1" in code  # the snippet's server, swapped for the scripted one
    server.reply(action("word_count", text="the quick brown fox"))
    server.reply(action(answer="There are 4 words."))
    script = tmp_path / "snippet.py"
    script.write_text(code.replace("http://localhost:11434/v1", server.url))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path,
                          env=child_env(), timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("final There are 4 words. 1 ")


@pytest.mark.parametrize("shown", SHOWN, ids=lambda s: s.splitlines()[0][:40])
def test_shown_commands_print_what_the_readme_shows(shown, tmp_path):
    command, *printed = shown.rstrip("\n").splitlines()
    argv = shlex.split(command[2:])
    done = subprocess.run([sys.executable, "-m", "agent", *argv[1:]], capture_output=True, text=True,
                          cwd=tmp_path, env=child_env(), timeout=60)
    assert (done.stdout + done.stderr).splitlines() == printed


def test_the_readme_shows_probe_in_its_three_situations():
    assert len(PROBES) == 3 and len({p.splitlines()[-1] for p in PROBES}) == 3


@pytest.mark.parametrize("shown", PROBES, ids=lambda s: s.splitlines()[-1].split()[2])
def test_probe_prints_what_the_readme_shows(shown, server, tmp_path):
    from agent.evaluation.probe import MARKER

    command, *printed = shown.rstrip("\n").splitlines()
    if "yes  returned a well-formed tool call" in printed[0]:
        server.reply(tool_calls=[{"name": "multiply", "arguments": {"a": 17, "b": 23}}])
    else:
        server.refuse("tools")
    if printed[1].split()[3] == "yes":
        server.reply(f'{{"greeting": "Hello!", "marker": "{MARKER}"}}')
    else:
        server.refuse("response_format")
    argv = shlex.split(command[2:].replace("http://localhost:8000/v1", server.url))
    done = subprocess.run([sys.executable, "-m", "agent", *argv[1:]], capture_output=True, text=True,
                          cwd=tmp_path, env=child_env(), timeout=60)
    assert (done.stdout + done.stderr).splitlines() == printed


def test_env_example_copied_unedited_sets_nothing():
    assert dotenv_values(ROOT / ".env.example") == {}


def test_the_readme_stays_short_enough_for_a_newcomer_and_its_links_lead_somewhere():
    assert len(README.splitlines()) < 700  # the experiments' record and the details are pages in docs/
    for target in re.findall(r"\]\(((?:docs|examples)/[^)#]+)", README):
        assert (ROOT / target).is_file(), target
