import os

import pytest

from tests.openai_server import ScriptedServer


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch):
    """Keep the developer's OPENAI_* / AGENT_* settings out of every test."""
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "AGENT_")):
            monkeypatch.delenv(name, raising=False)


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
