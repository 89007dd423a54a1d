"""Prints how long parse_action takes on a clean action and on hostile replies of about 256 kB.

    python bench/bench_parsing.py                      # the current agent/parsing.py
    python bench/bench_parsing.py /tmp/parsing_old.py  # another copy of it, to compare before and after

Each hostile reply is parsed in a child process, stopped after LIMIT seconds.
"""
import importlib.util
import json
import multiprocessing
import sys
import time
import tracemalloc

from agent.tools import builtin_registry

LIMIT = 120  # seconds per hostile reply (each runs twice: timed, then traced)
SIZE = 250_000  # just under the 256,000-character cap, so the scanning itself is measured
CALC = json.dumps({"type": "tool_call", "tool": "calculator", "arguments": {"expression": "128*96 + 45**2"}})


def fill(piece: str, size: int = SIZE) -> str:
    return piece * (size // len(piece))


HOSTILE = {
    "batch of 320 kB (over the cap)": "[" + fill('{"a":1}, ', 320_000) + '{"a":1}]',
    "batch of 250 kB": "[" + fill('{"a":1}, ') + '{"a":1}]',
    "<think> repeated, unclosed": fill("<think>"),
    "<think> then long text, unclosed": "<think> " + fill("lorem ipsum "),
    "<think> and </thinking> alternating": fill("<think></thinking>"),
    "{a repeated": fill("{a"),
    '{" repeated': fill('{"'),
    "[1, repeated": fill("[1, "),
    "prose with no JSON": fill("lorem ipsum dolor sit amet "),
    "repairable-looking junk, then an action": fill("{'x' [True, ") + CALC,
    "unclosed fence with a long tag": "```" + fill("a"),
    "huge integer in a final answer": '{"type": "final", "answer": ' + "1" * 5000 + "}",
    "[ nested 100,000 deep": "[" * 100_000,
    "[ nested 900 deep, closed": "[" * 900 + "]" * 900,
    "[{ repeated, then ] repeated (closers to mend)": fill("[{", SIZE // 2) + fill("]", SIZE // 2),
    "{ repeated, then a value left open": fill("{", SIZE - 10) + '"a": 1',
    "unterminated string": '{"type": "final", "answer": "' + fill("x"),
}


def load(path: str | None):
    if path is None:
        from agent import parsing
        return parsing
    spec = importlib.util.spec_from_file_location("parsing_under_test", path)
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def outcome(parsing, text: str, schema) -> str:
    try:
        parsing.parse_action(text, schema)
        return "parsed"
    except parsing.ParseError as error:
        return error.kind
    except Exception as error:  # the code before the fix crashes on some of these
        return f"CRASH {type(error).__name__}"


def measure(path: str | None, label: str, results) -> None:
    """In a child process: seconds, peak traced MB and outcome of parsing one hostile reply."""
    parsing, schema = setup(path)
    text = HOSTILE[label]
    started = time.perf_counter()
    result = outcome(parsing, text, schema)
    elapsed = time.perf_counter() - started
    tracemalloc.start()  # a second run for the memory: tracing slows it down
    outcome(parsing, text, schema)
    results.put((elapsed, tracemalloc.get_traced_memory()[1] / 1e6, result))


def setup(path: str | None):
    parsing = load(path)
    schema = parsing.action_schema(builtin_registry(".").parameters())
    if isinstance(schema, dict) and hasattr(parsing, "ActionSchema"):  # an older copy: precompiled once here
        schema = parsing.ActionSchema(schema)
    return parsing, schema


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else None
    parsing, schema = setup(path)
    n = 5000
    started = time.perf_counter()
    for _ in range(n):
        parsing.parse_action(CALC, schema)
    print(f"{'clean action':<44} {(time.perf_counter() - started) / n * 1e6:10.1f} µs/parse")
    for label, text in HOSTILE.items():
        results = multiprocessing.Queue()
        child = multiprocessing.Process(target=measure, args=(path, label, results))
        child.start()
        child.join(LIMIT)
        if child.is_alive():
            child.terminate()
            child.join()
            print(f"{label:<44} {'> ' + str(LIMIT * 1000):>10} ms  {len(text) / 1e3:6.0f} kB  (stopped)", flush=True)
            continue
        elapsed, peak, result = results.get()
        print(f"{label:<44} {elapsed * 1e3:10.1f} ms  {len(text) / 1e3:6.0f} kB  peak {peak:7.1f} MB  {result}",
              flush=True)


if __name__ == "__main__":
    main()
