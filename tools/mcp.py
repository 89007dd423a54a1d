"""Tools from Model Context Protocol servers: each server started over stdio with the official `mcp` SDK (the
`mcp` extra), its tools listed and made into plain Tools whose function forwards the call.

The SDK is asyncio-based and the loop is not: one background thread runs an event loop that owns every
server's client session, and a tool's function waits for its call's result there, with a timeout. A server
that fails to start, dies or does not answer in time is dropped with one message (``warn``); a call to one of
its tools is then an error result, and the run goes on. ``close`` (or leaving the ``with`` block) shuts every
server down; the SDK starts each in its own process group and stops the whole group.

What a server says about its tools is a third party's text: it reaches the prompt only as the tool list (a
description capped at MAX_DESCRIPTION characters, each parameter's at MAX_PARAMETER_DESCRIPTION), never as a
rule (an MCP tool brings no ``hint``).
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import re
import shlex
import os
import threading
import time
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any, Callable
from urllib.parse import unquote

from .registry import Tool, ToolError
from .text import shorten

MAX_DESCRIPTION = 1000  # characters of a tool's description kept for the prompt
MAX_PARAMETER_DESCRIPTION = 300  # characters of each description inside its parameter schema
MAX_SCHEMA_CHARS = 20_000  # a parameter schema longer than this (as JSON) is refused
MAX_TOOLS = 100  # tools taken from one server
MAX_RESULT_CHARS = 1_000_000  # of a result's text, before the run's own --max-output cut
TIMEOUT = 30.0  # seconds for one call, and for a server to start
MIN_START_TIMEOUT = 10.0  # a server gets at least this long to start, whatever the call timeout
STOP_TIMEOUT = 10.0  # seconds for all servers to shut down (the SDK waits 2 s, then stops the group)
INSTALL = "pip install 'prompt-protocol-agent[mcp]'"
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_LAUNCHERS = {"python", "python3", "uv", "uvx", "npx", "node", "pipx", "bunx", "deno", "docker", "run"}


class MCPUnavailable(Exception):
    """The `mcp` SDK is not installed."""


@dataclass(frozen=True)
class ServerSpec:
    """How to start one server: its name (the prefix of its tools' names), the command and its arguments."""

    name: str
    command: str
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # added to the few variables the SDK passes on (PATH, HOME…)
    origin: str = "--mcp"  # where it was given, for messages


def parse_command(text: str, origin: str = "--mcp") -> ServerSpec:
    """``"COMMAND ARGS..."`` split as a shell would (no shell runs it), optionally led by ``NAME=``; without a
    name, one is made from the command (``mcp-server-time`` → ``time``). Raises ValueError."""
    try:
        words = shlex.split(text)
    except ValueError as error:
        raise ValueError(f"{origin} {text!r}: {error}; quote the command as one argument") from None
    name = None
    if words and re.fullmatch(r"[A-Za-z0-9_-]+=.+", words[0]) and "/" not in words[0].split("=", 1)[0]:
        name, words[0] = words[0].split("=", 1)
    if not words or not words[0].strip():
        raise ValueError(f"{origin} {text!r} names no command; pass --mcp \"COMMAND ARGS...\"")
    return ServerSpec(name or server_name(words), words[0], words[1:], origin=origin)


def server_name(words: list[str]) -> str:
    """A short name for a server from its command line: the program's (or, for a launcher like python or npx,
    its first plain argument's) name, without a path, an extension or an mcp-server prefix."""
    chosen = words[0]
    if PurePath(chosen).stem.rstrip("0123456789.") in _LAUNCHERS or PurePath(chosen).name in _LAUNCHERS:
        for index, word in enumerate(words[1:], 1):
            if word == "-c":  # code on the command line: the launcher's own name
                break
            if word == "-m" and index + 1 < len(words):  # a module: its name
                chosen = words[index + 1].rsplit(".", 1)[-1]
                break
            if not word.startswith("-"):
                chosen = word
                break
    stem = PurePath(chosen.split("@")[0] if not chosen.startswith("@") else chosen.rsplit("/", 1)[-1]).name
    stem = re.sub(r"\.(py|js|mjs|ts)$", "", stem)
    stem = re.sub(r"^(mcp[-_]server[-_]|server[-_]|mcp[-_])|([-_]mcp[-_]server|[-_]server|[-_]mcp)$", "", stem)
    return _safe(stem, 24) or "mcp"


def tool_name(server: str, name: str) -> str:
    """``server_tool``, with what the registry refuses replaced by '_' and, past 64 characters, shortened
    with a hash of the whole so two long names stay apart."""
    whole = _safe(f"{server}_{name}", 10_000)
    if len(whole) <= 64:
        return whole
    return f"{whole[:55]}_{hashlib.sha256(whole.encode()).hexdigest()[:8]}"


def _safe(text: str, limit: int) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", text)[:limit]


@dataclass
class _Server:
    spec: ServerSpec
    session: Any = None
    stop: Any = None  # an asyncio.Event, made on the servers' loop when it starts
    task: asyncio.Future | None = None
    dead: str = ""  # why its tools can no longer be called
    tools: list[str] = field(default_factory=list)  # the names its tools are offered under
    errlog: _Tail | None = None
    starting: Any = None  # the anyio cancel scope of its start, while it starts


class MCPServers:
    """The MCP servers of a run (or of a chat session, or an eval), started once; ``tools`` holds their tools."""

    def __init__(self, specs: list[ServerSpec], *, timeout: float = TIMEOUT, warn: Callable[[str], None] = print,
                 taken: set[str] | frozenset = frozenset()):
        if specs:
            try:
                import mcp  # noqa: F401
            except ImportError as error:
                raise MCPUnavailable(f"MCP servers need the mcp extra: {INSTALL}") from error
        names = [s.name for s in specs]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"two MCP servers are named {', '.join(twice)}; name them apart: "
                             "--mcp \"NAME=COMMAND ARGS...\" or [mcp.servers.NAME] in agent.toml")
        self.timeout, self.warn = timeout, warn
        self.start_timeout = max(timeout, MIN_START_TIMEOUT)
        self.tools: list[Tool] = []
        self.servers = [_Server(s) for s in specs]
        self._taken = set(taken)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp", daemon=True)
        self._closed = False
        self._lock = threading.Lock()

    def __enter__(self) -> MCPServers:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> MCPServers:
        """Start every server at once and take their tools; a server that fails is left out with a message."""
        if not self.servers:
            return self
        self._thread.start()
        try:
            return self._start_all()
        except BaseException:  # Ctrl-C while they start: none is left running
            self.close()
            raise

    def _start_all(self) -> MCPServers:
        pending = [(server, asyncio.run_coroutine_threadsafe(self._start(server), self._loop))
                   for server in self.servers]
        for server, future in pending:
            try:
                listed = future.result(self.start_timeout + 1)
            except (FutureTimeout, asyncio.TimeoutError):
                listed = None
                self._drop(server, f"({_shown(server.spec)}) did not start within {self.start_timeout:g}s "
                                   "(is it an MCP server speaking stdio?)")
            except Exception as error:
                listed = None
                self._drop(server, f"({_shown(server.spec)}) could not start: {_why(error, server)}")
            if listed is not None:
                self._add_tools(server, listed)
        return self

    async def _start(self, server: _Server) -> list[dict]:
        """Start the server's session in a task that keeps it open until the server is stopped; its tools."""
        ready: asyncio.Future = self._loop.create_future()
        server.stop = asyncio.Event()
        server.task = asyncio.ensure_future(self._serve(server, ready))
        try:  # _serve gives up at start_timeout itself; this is a backstop
            return await asyncio.wait_for(asyncio.shield(ready), self.start_timeout + 2)
        except BaseException:
            ready.cancel()  # nobody waits for it any more
            if server.starting is not None:
                server.starting.cancel()
            raise

    async def _serve(self, server: _Server, ready: asyncio.Future) -> None:
        import anyio
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client

        spec = server.spec
        server.errlog = _Tail()
        params = StdioServerParameters(command=spec.command, args=spec.args, env=spec.env or None,
                                       encoding_error_handler="replace")
        try:
            async with stdio_client(params, errlog=server.errlog.file) as (read, write):
                async with ClientSession(read, write) as session:
                    # cancelled through anyio (never the task itself), so the SDK's shielded shutdown, which
                    # stops the server's process group, always runs
                    with anyio.CancelScope() as server.starting, anyio.fail_after(self.start_timeout):
                        listed = await _list_tools(session)
                    if server.starting.cancel_called:
                        raise RuntimeError("stopped while it started")
                    server.starting = None
                    server.session = session
                    ready.set_result(listed)
                    await server.stop.wait()
        except BaseException as error:
            if not ready.done():
                ready.set_exception(error if isinstance(error, Exception) else RuntimeError("stopped"))
            elif not server.dead and not self._closed:
                self._drop(server, f"stopped ({_message(error)[:200]})")
        else:
            if not server.stop.is_set() and not self._closed:
                self._drop(server, "stopped")
        finally:
            server.session = None

    def _add_tools(self, server: _Server, listed: list[dict]) -> None:
        if len(listed) > MAX_TOOLS:
            self.warn(f"MCP server {server.spec.name}: {len(listed)} tools; only the first {MAX_TOOLS} are offered")
        for entry in listed[:MAX_TOOLS]:
            try:
                made = self._tool(server, entry)
            except (RecursionError, ValueError, TypeError) as error:  # a schema nested too deep, say
                made = f"its input schema cannot be used ({type(error).__name__})"
            if isinstance(made, str):
                self.warn(f"MCP server {server.spec.name}: tool {str(entry.get('name'))[:80]!r} left out: {made}")
            else:
                self._taken.add(made.name)
                self.tools.append(made)
                server.tools.append(made.name)

    def _tool(self, server: _Server, entry: dict) -> Tool | str:
        """The Tool for a listed MCP tool, or why it cannot be offered."""
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError

        original = entry.get("name")
        if not isinstance(original, str) or not original:
            return "it has no name"
        name = tool_name(server.spec.name, original)
        if name in self._taken:
            return f"its name {name} is taken (by a built-in tool or another of the server's tools)"
        schema = entry.get("inputSchema")
        if not isinstance(schema, dict):
            schema = {"type": "object", "properties": {}}
        if schema.get("type") != "object":
            return "its input schema is not a JSON Schema object"
        if len(json.dumps(schema)) > MAX_SCHEMA_CHARS:
            return f"its input schema is longer than {MAX_SCHEMA_CHARS:,} characters"
        schema = _capped(schema)
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as error:
            return f"its input schema is invalid ({error.message[:200]})"
        unresolved = _unresolved_reference(schema)
        if unresolved:
            return f"its input schema refers to {unresolved[:100]!r}, which is not in it"
        description = shorten(_clean(entry.get("description") or entry.get("title") or f"{original} (no description)"),
                              MAX_DESCRIPTION)
        read_only = (entry.get("annotations") or {}).get("readOnlyHint") is True

        def call(**arguments):
            return self.call(server, original, arguments)

        return Tool(name, description, schema, call, writes=not read_only)

    def call(self, server: _Server, name: str, arguments: dict) -> str:
        """The text of a call's result; an error result (ToolError) when the server says so, has gone or is late."""
        session = server.session
        if server.dead or session is None:
            raise ToolError(f"the MCP server {server.spec.name} is not running ({server.dead or 'it stopped'}); "
                            "its tools cannot be used in this run, use another way")
        future = asyncio.run_coroutine_threadsafe(session.call_tool(name, arguments), self._loop)
        try:
            result = future.result(self.timeout)
        except KeyboardInterrupt:  # the run stops; so does the call
            future.cancel()
            raise
        except (FutureTimeout, asyncio.TimeoutError):
            future.cancel()
            self._drop(server, f"did not answer a call to {name} within {self.timeout:g}s; it is stopped")
            raise ToolError(f"the MCP server {server.spec.name} did not answer within {self.timeout:g}s and was "
                            "stopped; its tools cannot be used in this run, use another way") from None
        except Exception as error:
            if server.session is None or _connection_lost(error):
                self._drop(server, f"stopped during a call to {name} ({_message(error)[:200]})")
                raise ToolError(f"the MCP server {server.spec.name} stopped; its tools cannot be used in this run, "
                                "use another way") from None
            raise ToolError(f"{server.spec.name} {name}: {_message(error)[:500]}") from None
        result = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        text = result_text(result)
        if result.get("isError"):
            raise ToolError(text or f"{name} failed (the server gave no reason)")
        return text

    def _drop(self, server: _Server, why: str) -> None:
        """Out of the run: one message, and the server stopped."""
        with self._lock:  # calls from several threads (eval's workers) may find it gone at once
            if server.dead:
                return
            server.dead = why.split(":")[0]
        self.warn(f"MCP server {server.spec.name} {why}; the run goes on without its tools")
        if server.stop is not None:
            self._loop.call_soon_threadsafe(server.stop.set)

    def close(self) -> None:
        """Stop every server and the event loop's thread; waits at most STOP_TIMEOUT seconds."""
        if self._closed or not self._thread.is_alive():
            self._closed = True
            return
        self._closed = True

        async def stop_all() -> None:
            """Each ready server's session ends (its input closed, then its group stopped); one still starting
            is cancelled, which stops it the same way."""
            tasks = [s.task for s in self.servers if s.task is not None]
            for server in self.servers:
                if server.stop is not None:
                    server.stop.set()
                if server.starting is not None:
                    server.starting.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=STOP_TIMEOUT - 1)

        try:
            asyncio.run_coroutine_threadsafe(stop_all(), self._loop).result(STOP_TIMEOUT)
        except Exception:
            pass
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(2)
            for server in self.servers:
                if server.errlog is not None:
                    server.errlog.close()


async def _list_tools(session) -> list[dict]:
    """The server's tools (wire format), a page at a time, up to a page past MAX_TOOLS."""
    await session.initialize()
    listed: list[dict] = []
    cursor = None
    while len(listed) <= MAX_TOOLS:
        page = await (session.list_tools(params=_page(cursor)) if cursor else session.list_tools())
        page = page.model_dump(mode="json", by_alias=True, exclude_none=True)
        listed += page.get("tools", [])
        cursor = page.get("nextCursor")
        if not cursor:
            break
    return listed


def result_text(result: dict) -> str:
    """A CallToolResult (wire format) as text: text content as it is; other content described, not dropped."""
    parts = []
    for block in result.get("content") or []:
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind in ("image", "audio"):
            size = len(block.get("data") or "") * 3 // 4
            parts.append(f"[{kind}: {block.get('mimeType', 'unknown type')}, about {size:,} bytes, not shown]")
        elif kind == "resource_link":
            parts.append(f"[resource link: {block.get('uri', '?')}"
                         f"{' (' + block['name'] + ')' if block.get('name') else ''}]")
        elif kind == "resource":
            resource = block.get("resource") or {}
            if "text" in resource:
                parts.append(f"[resource {resource.get('uri', '?')}]\n{resource['text']}")
            else:
                parts.append(f"[resource {resource.get('uri', '?')}: {resource.get('mimeType', 'binary')}, "
                             "not shown]")
        else:
            parts.append(f"[{kind or 'unknown'} content, not shown]")
    if not parts and result.get("structuredContent") is not None:
        parts.append(json.dumps(result["structuredContent"], ensure_ascii=False))
    text = "\n".join(parts)
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + f"\n[… {len(text) - MAX_RESULT_CHARS:,} more characters not read]"
    return text or "(no output)"


def _capped(schema: Any) -> Any:
    """A copy of the schema with every "description" string cleaned and capped."""
    if isinstance(schema, dict):
        return {key: shorten(_clean(value), MAX_PARAMETER_DESCRIPTION)
                if key == "description" and isinstance(value, str) else _capped(value) for key, value in schema.items()}
    if isinstance(schema, list):
        return [_capped(item) for item in schema]
    return schema


def _unresolved_reference(schema: dict) -> str | None:
    """A $ref (or $dynamicRef) of the schema that does not point inside it: checking arguments against it would
    fail (nothing is fetched). Only JSON pointers from the root ("#", "#/$defs/x") are taken."""
    pending, found = [schema], []
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            found += [node[key] for key in ("$ref", "$dynamicRef") if key in node]
            if "$id" in node and node is not schema:
                return str(node["$id"])  # a new base for the references below it: not followed here
            pending += list(node.values())
        elif isinstance(node, list):
            pending += node
    for reference in found:
        if reference == "#":
            continue
        if not isinstance(reference, str) or not reference.startswith("#/"):
            return str(reference)
        target = schema
        for part in reference[2:].split("/"):
            part = unquote(part).replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and part in target:
                target = target[part]
            elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            else:
                return reference
    return None


def _clean(text: str) -> str:
    """Without control characters (escape sequences included); whitespace kept as spaces."""
    return re.sub(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", " ", str(text)).strip()


def _page(cursor: str):
    from mcp import types

    return types.PaginatedRequestParams(cursor=cursor)


def _connection_lost(error: BaseException) -> bool:
    """Whether the error is the connection's end (the server has gone), not one about this call (a JSON-RPC
    error the server sent, a result that does not fit the tool's output schema)."""
    from mcp.types import CONNECTION_CLOSED

    if getattr(getattr(error, "error", None), "code", None) == CONNECTION_CLOSED:
        return True
    return isinstance(error, (OSError, EOFError)) or type(error).__name__ in (
        "ClosedResourceError", "BrokenResourceError", "EndOfStream")


def _message(error: BaseException) -> str:
    """The innermost message of an error (the SDK wraps failures in exception groups)."""
    while inner := getattr(error, "exceptions", None):
        error = inner[0]
    text = getattr(error, "message", None)
    return " ".join(str(text if isinstance(text, str) else error).split()) or type(error).__name__


def _why(error: BaseException, server: _Server) -> str:
    """The error, and the last line the server wrote on its stderr, if any."""
    why = _message(error)[:300]
    if isinstance(error, FileNotFoundError) or "No such file" in why:
        why = f"no program {server.spec.command!r} (is it installed and on PATH?)"
    elif why == "Connection closed":
        why = "it closed the connection before it was ready (did it exit?)"
    last = _last_line(server.errlog)
    return f"{why}; it said: {last}" if last else why


class _Tail:
    """Where a server writes its stderr: a pipe, read on a thread that keeps only the last few kB (a server
    that writes without end fills neither the memory nor the disk)."""

    KEEP = 4000

    def __init__(self):
        read, write = os.pipe()
        self.file = os.fdopen(write, "w")
        self.text = ""
        threading.Thread(target=self._read, args=(read,), name="mcp-stderr", daemon=True).start()

    def _read(self, fd: int) -> None:
        try:
            while chunk := os.read(fd, 65536):  # ends when every writer (the server, its children, us) is gone
                self.text = (self.text + chunk.decode("utf-8", "replace"))[-self.KEEP:]
        except OSError:
            pass
        finally:
            os.close(fd)

    def last_line(self) -> str:
        lines = [line.strip() for line in self.text.splitlines() if line.strip()]
        return _clean(lines[-1])[:200] if lines else ""

    def close(self) -> None:
        self.file.close()


def _last_line(errlog: _Tail | None) -> str:
    if errlog is None:
        return ""
    time.sleep(0.05)  # what the server wrote as it ended may still be on its way through the pipe
    return errlog.last_line()


def _shown(spec: ServerSpec) -> str:
    return shorten(" ".join([spec.command, *spec.args]), 80)
