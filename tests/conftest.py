import os
import signal

import pytest

from agent.models.local_files import cache_dir
from tests.openai_server import ScriptedServer

MODEL_CACHE = str(cache_dir(os.environ))  # where the embedded model's files are assembled, found before the
# tests isolate the cache folder: the local-model tests keep using them


def pytest_configure(config):
    """The `agent` processes the tests start inherit no input: a pipe left open by whatever runs the tests
    would otherwise be read as the task's piped input. Tests that pipe input in say so."""
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    # Ctrl-C as a terminal sends it, for the processes the tests start: a test run started in the background
    # of a shell (`.ci/run &`, nohup) inherits SIGINT ignored, which its children would inherit in turn
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch, tmp_path_factory):
    """Keep the developer's OPENAI_* / AGENT_* settings, configuration file, data folder (sessions) and cache
    folder (`agent probe`'s findings) out of every test; the embedded model's files stay where they are."""
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "AGENT_")):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config")))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("data")))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.setenv("AGENT_CACHE_DIR", MODEL_CACHE)


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """A fresh folder, made the current one."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def server():
    """A started ScriptedServer speaking the OpenAI chat completions API."""
    with ScriptedServer() as scripted:
        yield scripted
