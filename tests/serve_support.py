"""`agent serve` started as a child process for the tests, in front of a scripted upstream."""
from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager

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
