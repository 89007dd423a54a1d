"""A scripted OpenAI-compatible server that plays a small, imperfect model on the function-calling suite, so
`agent eval` (its three arms, the paired statistics, the --html report) can be shown with no model at all.

    python bench/demo_server.py            # prints its base URL, serves until Ctrl-C
    agent eval examples/function_calling.jsonl --arm prompt --arm prompt-constrained --arm native \\
        --base-url URL --model demo --html report.html

It knows each task's expected calls (from the suite) and errs on purpose, the way the embedded 1.5B model
errs, decided by a hash of the task and the arm (the same every time):
- prompt (no constraint): a fifth of first replies carry the call, then an imagined result and answer (the
  call is run, the early answer dropped); a tenth write a number as arithmetic (`5 * 1`, not JSON: re-asked),
  and some of those re-asks end in an answer from memory;
- prompt-constrained: every reply is a well-formed action; a third of `choose` tasks answered from memory;
- native: one call where several are needed (`parallel`), half the `choose` tasks answered from memory,
  a quarter of `none` tasks calling the closest tool.
Not a benchmark: a demonstration of what the report shows.
"""
from __future__ import annotations

import hashlib
import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.openai_server import ScriptedServer  # noqa: E402  (the tests' own server)

SUITE = ROOT / "examples" / "function_calling.jsonl"


def _chance(key: str, share: float) -> bool:
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF < share


def _calls(task: dict) -> list[dict]:
    """The calls the task expects, each with the first acceptable value of every argument it lists."""
    return [{"tool": c["tool"], "arguments": {k: v[0] for k, v in c["arguments"].items()
                                              if k not in c.get("optional", [])}}
            for c in task["checks"].get("calls_match", [])]


def _action(call: dict) -> str:
    return json.dumps({"type": "tool_call", "tool": call["tool"], "arguments": call["arguments"]})


def _final(answer: str) -> str:
    return json.dumps({"type": "final", "answer": answer})


class DemoServer(ScriptedServer):
    def __init__(self, suite: Path = SUITE):
        super().__init__()
        self.tasks = {t["task"]: t for t in map(json.loads, suite.read_text().splitlines()) if t}

    def _next(self, request: dict) -> dict:
        body = request["body"]
        with self._lock:
            self.requests.append({"path": request["path"], "body": "(not kept)"})
        messages = body.get("messages", []) if isinstance(body, dict) else []
        arm = "native" if "tools" in body else "prompt-constrained" if "response_format" in body else "prompt"
        task = next((self.tasks[m["content"]] for m in messages if m.get("role") == "user"
                     and m.get("content") in self.tasks), None)
        if task is None:
            return self._step("I do not know this task.")
        key, last = f"{task['id']} {arm}", messages[-1]
        time.sleep(0.02)
        if arm == "native":
            return self._native(task, key, messages)
        if last["content"].startswith(("Result of ", "Results, in the order")):
            result = last["content"].split("\n", 1)[-1].strip()
            return self._step(_final(f"The answer: {result}"))
        if last["content"].startswith("Your last reply could not be used"):
            if _chance(key + " gives up", 0.4):
                return self._step(_final("From memory: it is about 42."))
            return self._step(self._first_action(task))
        if arm == "prompt" and _chance(key + " rambles", 0.2):
            return self._step(self._first_action(task) + "\nResult: 42\n" + _final("It is 42."))
        if arm == "prompt" and _chance(key + " computes", 0.1):
            return self._step(re.sub(r'(": -?\d+(?:\.\d+)?)', r"\1 * 1", self._first_action(task), count=1))
        if arm == "prompt-constrained" and task["category"] == "choose" and _chance(key, 1 / 3):
            return self._step(_final("From memory: roughly 100."))
        return self._step(self._first_action(task))

    def _first_action(self, task: dict) -> str:
        calls = _calls(task)
        if not calls:
            return _final("None of the tools can do that.")
        if len(calls) == 1:
            return _action(calls[0])
        return json.dumps([json.loads(_action(c)) for c in calls])

    def _native(self, task: dict, key: str, messages: list[dict]) -> dict:
        if messages[-1].get("role") == "tool":
            return self._step(f"The answer: {messages[-1].get('content')}")
        calls = _calls(task)
        if task["category"] == "none" and _chance(key, 0.25):
            closest = task["tools"][0]["function"]["name"]
            calls = [{"tool": closest, "arguments": {}}]
        elif task["category"] == "choose" and _chance(key, 0.5):
            calls = []
        elif task["category"] == "parallel":
            calls = calls[:1]
        if not calls:
            return self._step("I think it is about 100." if task["category"] != "none" else
                              "None of the tools fits that question.")
        tool_calls = [self._tool_call({"name": c["tool"], "arguments": c["arguments"]}) for c in calls]
        return {"status": 200, "message": {"role": "assistant", "content": None, "tool_calls": tool_calls},
                "finish_reason": "tool_calls", "usage": True, "headers": {}, "delay": 0.0, "pause": 0.0}

    @staticmethod
    def _step(content: str) -> dict:
        return {"status": 200, "message": {"role": "assistant", "content": content}, "finish_reason": "stop",
                "usage": True, "headers": {}, "delay": 0.0, "pause": 0.0}


def main() -> None:
    with DemoServer() as server:
        print(server.url, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
