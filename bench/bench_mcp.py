"""Prints what an MCP server costs a run: starting it and listing its tools, one call through the registry
(arguments checked, the call forwarded over stdio and its result read), and stopping it. Needs the mcp extra;
the tests' own server always, mcp-server-time when it is installed.

    python bench/bench_mcp.py
"""
import shutil
import statistics
import sys
import time
from pathlib import Path

from agent.tools import Registry
from agent.tools.mcp import MCPServers, parse_command

SERVERS = [  # the command, a tool and its arguments
    (f"{sys.executable} {Path(__file__).parent.parent / 'tests' / 'mcp_demo.py'}", "demo_add", {"a": 1, "b": 2}),
    ("mcp-server-time", "time_get_current_time", {"timezone": "UTC"}),
]
CALLS = 200


def main() -> None:
    print(f"{'server':<18} {'start + list':>13} {'call, median':>13} {'call, p95':>10} {'stop':>8}")
    for command, tool, arguments in SERVERS:
        if not shutil.which(command.split()[0]):
            print(f"{command:<18} not installed")
            continue
        started = time.perf_counter()
        with MCPServers([parse_command(command)], warn=print) as servers:
            ready = time.perf_counter() - started
            registry = Registry(servers.tools)
            took = []
            for _ in range(CALLS):
                begun = time.perf_counter()
                result = registry.call(tool, arguments)
                took.append(time.perf_counter() - begun)
                assert result.ok, result.text
            stopping = time.perf_counter()
        stopped = time.perf_counter() - stopping
        took.sort()
        name = parse_command(command).name
        print(f"{name:<18} {ready * 1000:10.0f} ms {statistics.median(took) * 1000:10.2f} ms "
              f"{took[int(CALLS * 0.95)] * 1000:7.2f} ms {stopped * 1000:5.0f} ms")


if __name__ == "__main__":
    main()
