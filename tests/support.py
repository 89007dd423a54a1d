"""Small helpers shared by the tests that drive the `agent` command."""
import json
import os
import subprocess


def action(tool=None, answer=None, **arguments) -> str:
    """A prompt-protocol reply: a call to ``tool`` with ``arguments``, or the final ``answer``."""
    if tool is None:
        return json.dumps({"type": "final", "answer": answer})
    return json.dumps({"type": "tool_call", "tool": tool, "arguments": arguments})


def child_env(**extra) -> dict:
    """The environment for an `agent` child process: the installed package, no endpoint settings (the folder
    of the embedded model's files is kept)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AGENT_", "OPENAI_")) or k == "AGENT_CACHE_DIR"}
    return {**env, **extra}


def stop(child, timeout: float = 10) -> None:
    """Ends a child process: asked to stop, then killed if it has not within ``timeout`` seconds."""
    child.terminate()
    try:
        child.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
