"""Prints how fast the pure-Python parts are: parsing replies and the calculator. The loop's own cost per
step is in bench_overhead.py, hostile replies in bench_parsing.py.

    python bench/bench_core.py
"""
import json
import time

from agent.parsing import action_schema, parse_action
from agent.tools import builtin_registry
from agent.tools.calculator import evaluate


def per_call(label: str, function, n: int) -> None:
    started = time.perf_counter()
    for _ in range(n):
        function()
    elapsed = time.perf_counter() - started
    print(f"{label:<48} {elapsed / n * 1e6:10.1f} µs/call  ({n} calls)")


def main() -> None:
    registry = builtin_registry(".")
    schema = action_schema(registry.parameters())  # compiled once, as the protocols do
    clean = json.dumps({"type": "tool_call", "tool": "calculator", "arguments": {"expression": "128*96 + 45**2"}})
    messy = ("<think>the user wants arithmetic</think>Sure! ```json\n{'type': 'tool_call', 'tool': 'calculator', "
             "'arguments': {'expression': '2+2',},}\n```")
    per_call("parse a clean action", lambda: parse_action(clean, schema), 5000)
    per_call("parse a messy action (think, fence, repairs)", lambda: parse_action(messy, schema), 5000)
    per_call("parse 20 kB of prose with no JSON", lambda: _no_json(schema), 200)
    per_call("calculator 128*96 + 45**2 - 88/2", lambda: evaluate("128*96 + 45**2 - 88/2"), 5000)
    per_call("calculator rejects 9**9**9", lambda: _rejects("9**9**9"), 5000)



def _no_json(schema) -> None:
    try:
        parse_action("lorem ipsum dolor sit amet " * 800, schema)
    except Exception:
        pass


def _rejects(expression: str) -> None:
    try:
        evaluate(expression)
    except Exception:
        pass


if __name__ == "__main__":
    main()
