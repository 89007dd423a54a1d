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
        tokens, state = loaded
        import llama_cpp

        buffer = (ctypes.c_uint8 * len(state)).from_buffer(state)
        if llama_cpp.llama_state_set_data(llama.ctx, buffer, len(state)) != len(state):
            llama.reset()  # the next evaluation starts from position 0, replacing whatever was set
            return False
        llama.input_ids[:len(tokens)] = tokens
        llama.n_tokens = len(tokens)
        llama._requires_eval = True  # the logits are not restored: llama-cpp-python evaluates a token again
        try:
            os.utime(path)  # recently used: kept longest
        except OSError:
            pass
        return True

    def save(self, llama, prefix: str) -> None:
        """Keep the state of ``llama``'s context for the next process whose prompt starts with ``prefix``; a state
        over the size bound, or a folder that cannot be written, is simply not kept."""
        import llama_cpp

        size = llama_cpp.llama_state_get_size(llama.ctx)
        if not 0 < size <= self.max_bytes:
            return
        buffer = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_get_data(llama.ctx, buffer, size)
        if not 0 < written <= size:
            return
        state = memoryview(buffer).cast("B")[:written]
        header = {"identity": self.identity, "prefix": _sha256(prefix.encode()),
                  "tokens": [int(t) for t in llama.input_ids[:llama.n_tokens]]}
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
