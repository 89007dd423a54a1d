"""The embedded model's state after a process's first prompt, kept on disk so that the next process starts warm.

Every `agent "TASK"` is a new process, which would read the whole system prompt again before its first token.
After the first model call of a fresh context, the context's state (llama.cpp's ``llama_state_get_data``) is
written here with the tokens it holds; the next process whose first prompt starts the same way loads it, and
llama-cpp-python's own prefix matching evaluates only the tokens that differ (the task's).

A file is named by what the state may be used with: the model, the llama.cpp build, the context size and the
start of the prompt (the first message and the tools, which the chat template writes first). Its header repeats
all of that and the SHA-256 of the state, checked before llama.cpp sees a byte: a file of another model, build
or prompt, a truncated or damaged one is not used, and the next save replaces it. Files are written to a temporary
name and renamed, so two runs at once each read a whole file; they are bounded in size and number.
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import os
import threading
import time
from pathlib import Path

MAGIC = b"prompt-protocol-agent state 1\n"
MAX_HEADER = 1 << 20  # the header's JSON line: the key and up to a full context of token ids
MAX_STATE_BYTES = 96 << 20  # one state; about 3,000 tokens of the 1.5B model (28 kB a token)
MAX_FILES = 8  # the least recently used beyond these are deleted
MIN_GAIN_CHARS = 200  # a kept state in memory is loaded when it shares this much more of a prompt's start
STALE_SECONDS = 3600  # a temporary file this old was left by a run that died while writing it


class PromptStates:
    """States of one model, build and context size in ``folder``; ``identity`` says which (it goes into every
    key). ``restore`` and ``save`` take the llama-cpp-python ``Llama`` and the prompt's start as text."""

    def __init__(self, folder: Path, identity: dict, max_bytes: int = MAX_STATE_BYTES, max_files: int = MAX_FILES):
        self.folder, self.identity = folder, identity
        self.max_bytes, self.max_files = max_bytes, max_files

    def path(self, prefix: str) -> Path:
        return self.folder / f"{self._key(prefix)[:32]}.state"

    def restore(self, llama, prefix: str) -> bool:
        """Load the state kept for ``prefix`` into the fresh context of ``llama``; False if there is none that is
        whole and meant for it (the context is then left fresh)."""
        path = self.path(prefix)
        loaded = self._read(path, prefix, llama.n_ctx())
        if loaded is None:
            return False
        if not load_state(llama, *loaded):
            return False
        try:
            os.utime(path)  # recently used: kept longest
        except OSError:
            pass
        return True

    def save(self, llama, prefix: str) -> None:
        """Keep the state of ``llama``'s context for the next process whose prompt starts with ``prefix``; a state
        over the size bound, or a folder that cannot be written, is simply not kept."""
        held = state_of(llama, self.max_bytes)
        if held is None:
            return
        tokens, state = held
        header = {"identity": self.identity, "prefix": _sha256(prefix.encode()), "tokens": tokens}
        if write_state(self.path(prefix), header, state):
            self._evict()

    def _key(self, prefix: str) -> str:
        return _sha256(json.dumps(self.identity, sort_keys=True).encode() + b"\0" + prefix.encode())

    def _read(self, path: Path, prefix: str, n_ctx: int) -> tuple[list[int], bytearray] | None:
        """The tokens and state bytes of ``path`` if it is whole and was written for this identity and prefix."""
        found = read_state(path, self.max_bytes)
        if found is None or not self._fits(found[0], prefix, n_ctx):
            return None
        return found[0]["tokens"], found[1]

    def _fits(self, header, prefix: str, n_ctx: int) -> bool:
        if not isinstance(header, dict) or header.get("identity") != self.identity:
            return False
        if header.get("prefix") != _sha256(prefix.encode()):
            return False
        tokens = header.get("tokens")
        return isinstance(tokens, list) and 0 < len(tokens) <= n_ctx and all(type(t) is int for t in tokens)

    def _evict(self) -> None:
        """Delete the least recently used states beyond ``max_files``, and temporary files a crash left."""
        try:
            files = sorted(((p.stat().st_mtime, p) for p in self.folder.glob("*.state")), reverse=True)
            stale = [p for p in self.folder.glob(".*.tmp") if time.time() - p.stat().st_mtime > STALE_SECONDS]
            for path in [p for _, p in files[self.max_files:]] + stale:
                path.unlink(missing_ok=True)
        except OSError:
            pass


class RecentStates:
    """In memory, the states of the last few prompts a context held, so that prompts taking turns (the arms of an
    evaluation, a helper agent and its parent, the clients of agent serve) each find theirs again instead of
    reading their start anew. A state is chosen by how much of the new prompt's start (as text) it shares;
    llama-cpp-python's own token matching then decides what is reused, so a poor choice costs time, never
    correctness. Switching costs a copy of the state each way, about 10 ms per 1,000 tokens."""

    def __init__(self, max_entries: int = 4, max_bytes: int = MAX_STATE_BYTES, min_gain: int = MIN_GAIN_CHARS):
        self.max_entries, self.max_bytes, self.min_gain = max_entries, max_bytes, min_gain
        # (prompt start, tokens, state), latest last
        self.entries: list[tuple[str | None, list[int], bytes | bytearray | memoryview]] = []
        self.current: str | None = None  # the start of the prompt the context holds, if it holds one
        self.stashed = False  # whether the context's state is among the entries as it is

    def before(self, llama, start: str) -> bool:
        """Ready ``llama``'s context for a prompt that begins with ``start``: keep the context's state if the
        prompt would overwrite much of it, and load a kept state that shares more of the prompt's start than
        the context does. Whether it loaded one."""
        held = _shared(self.current, start) if llama.n_tokens else 0
        if llama.n_tokens and not self.stashed and len(self.current or "") - held >= self.min_gain:
            self._keep(llama)
        best = max(self.entries, key=lambda entry: _shared(entry[0], start), default=None)
        switched = False
        if best is not None and _shared(best[0], start) >= held + self.min_gain:
            switched = load_state(llama, best[1], best[2])
            self.entries.remove(best)
            self.entries.append(best)
        self.current, self.stashed = start, switched  # a state just loaded is kept as it was
        return switched

    def _keep(self, llama) -> None:
        held = state_of(llama, self.max_bytes)
        if held is None:
            return
        self.entries = [entry for entry in self.entries if entry[0] != self.current][-(self.max_entries - 1):]
        self.entries.append((self.current, *held))
        self.stashed = True


def state_of(llama, max_bytes: int = MAX_STATE_BYTES) -> tuple[list[int], memoryview] | None:
    """The tokens ``llama``'s context holds and its state (llama.cpp's bytes), if at most ``max_bytes``."""
    import llama_cpp

    size = llama_cpp.llama_state_get_size(llama.ctx)
    if not 0 < size <= max_bytes:
        return None
    buffer = (ctypes.c_uint8 * size)()
    written = llama_cpp.llama_state_get_data(llama.ctx, buffer, size)
    if not 0 < written <= size:
        return None
    return [int(t) for t in llama.input_ids[:llama.n_tokens]], memoryview(buffer).cast("B")[:written]


def load_state(llama, tokens: list[int], state) -> bool:
    """Give ``llama``'s context the state ``state`` holding ``tokens``; False (and the context emptied) if
    llama.cpp does not take it."""
    import llama_cpp

    data = bytearray(state) if not isinstance(state, bytearray) else state
    buffer = (ctypes.c_uint8 * len(data)).from_buffer(data)
    if llama_cpp.llama_state_set_data(llama.ctx, buffer, len(data)) != len(data):
        llama.reset()  # the next evaluation starts from position 0, replacing whatever was set
        return False
    llama.input_ids[:len(tokens)] = tokens
    llama.n_tokens = len(tokens)
    llama._requires_eval = True  # the logits are not restored: llama-cpp-python evaluates a token again
    return True


def _shared(a: str | None, b: str) -> int:
    """How many characters ``a`` and ``b`` begin with in common."""
    return len(os.path.commonprefix([a, b])) if a is not None else 0


def write_state(path: Path, header: dict, state) -> bool:
    """Write ``header`` (with the size and SHA-256 of ``state`` added) and ``state`` to ``path`` atomically: under
    a temporary name, then renamed over it. False if the folder could not be written."""
    header = {**header, "bytes": len(state), "sha256": _sha256(state)}
    temp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(temp, "wb") as out:  # no fsync: a file a crash left short fails its SHA-256 and is replaced
            out.write(MAGIC + json.dumps(header, separators=(",", ":")).encode() + b"\n")
            out.write(state)
        os.replace(temp, path)
    except OSError:
        temp.unlink(missing_ok=True)
        return False
    return True


def read_state(path: Path, max_bytes: int = MAX_STATE_BYTES) -> tuple[dict, bytearray] | None:
    """The header and state of a file ``write_state`` wrote, if it is whole: its state as long as the header
    says (at most ``max_bytes``), nothing after it, and the SHA-256 the header gives. None otherwise."""
    try:
        with open(path, "rb") as file:
            if file.read(len(MAGIC)) != MAGIC:
                return None
            header = json.loads(file.readline(MAX_HEADER))
            size = header.get("bytes") if isinstance(header, dict) else None
            if type(size) is not int or not 0 < size <= max_bytes or not isinstance(header.get("sha256"), str):
                return None
            state = bytearray(size)
            if file.readinto(state) != size or file.read(1):
                return None  # truncated, or longer than it says
    except (OSError, ValueError):
        return None
    return (header, state) if _sha256(state) == header["sha256"] else None


def _sha256(data) -> str:
    return hashlib.sha256(data).hexdigest()
