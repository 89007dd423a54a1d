"""`agent serve` started as a child process for the tests, in front of a scripted upstream."""
from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager

import pytest

from tests.openai_server import ScriptedServer
from tests.support import child_env

LISTENING = re.compile(r"listening on (http://\S+/v1)")


@contextmanager
def serving(*args: str, env: dict | None = None):
    """`agent serve ARGS --port 0`, until the block ends; yields (base URL, the process, its stderr so far)."""
    with tempfile.TemporaryFile("w+") as stderr:
        child = subprocess.Popen([sys.executable, "-m", "agent", "serve", "--port", "0", *args],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                                 env=child_env(**(env or {})), text=True)
        try:
            url, deadline = None, time.monotonic() + 30
            while url is None:
                stderr.seek(0)
                found = LISTENING.search(stderr.read())
                if found:
                    url = found.group(1)
                elif child.poll() is not None or time.monotonic() > deadline:
                    stderr.seek(0)
                    raise RuntimeError(f"agent serve did not start: {stderr.read()}")
                else:
                    time.sleep(0.05)

            def said() -> str:
                stderr.seek(0)
                return stderr.read()

            yield url, child, said
        finally:
            child.terminate()
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


def serve_fixtures(*args: str):
    """The fixtures of a test file of `agent serve`: ``upstream`` (a scripted server) and ``served`` (serve in front
    of it, started with ``args``; its base URL and stderr), both for the module; ``up``, the upstream with nothing
    queued or recorded (and every queued reply used by the test's end); ``client``, an openai SDK client of serve.
    Assign them to the same names in the test file."""

    @pytest.fixture(scope="module")
    def upstream():
        with ScriptedServer() as scripted:
            yield scripted

    @pytest.fixture(scope="module")
    def served(upstream):
        with serving("--upstream-url", upstream.url, "--model", "up-model", *args) as (url, _, said):
            yield url, said

    @pytest.fixture
    def up(upstream):
        upstream._steps.clear()
        upstream.requests.clear()
        yield upstream
        assert not upstream.pending, "a queued upstream reply was not used"

    @pytest.fixture
    def client(served):
        import openai

        return openai.OpenAI(base_url=served[0], api_key="unused", max_retries=0, timeout=20)

    return upstream, served, up, client
