"""Whatever path the model sends, the file tools never read, list or write anything outside the workspace."""

import os
import tempfile
from pathlib import Path

from hypothesis import given, settings, strategies as st

from agent.tools import ToolError
from agent.tools.files import Workspace

SECRET = "TOPSECRET-b81f0c"  # the content of every file outside; its size, 7,777 bytes, is shown by no inside file
SECRET_SIZE = "7,777 bytes"
HIDDEN = "hidden-e4a9.txt"  # a name that exists only outside and is never generated: only a listing could show it
DEPTH = 6  # the workspace sits this deep in the sandbox, so that a path has room for all its '..'

# A fresh sandbox per example: in memory where the system has /dev/shm (much faster than most disks).
SCRATCH = "/dev/shm" if os.access("/dev/shm", os.W_OK | os.X_OK) else None

# Tokens replaced by absolute paths of the sandbox being tested.
WS, OUTSIDE, SANDBOX = "<ws>", "<outside>", "<sandbox>"

_NAMES = st.sampled_from(
    [
        "..", ".", "", "file.txt", "sub", "secret.txt", "new.txt", "link_file", "link_dir", "link_hop", "link_in",
        "dangling", "loop", "outside", "ws", "ws_evil", "l5", WS, OUTSIDE, SANDBOX, "/", "//", "~",
        "\0", "a\0b", "\udcff", "caf\udce9", "\ud800", "e\u0301", "\u202e", "\uff0e\uff0e", "..\u2215..", "…",
        "x" * 255, "x" * 256, "é" * 128, "y" * 5000, "/".join(["z" * 255] * 20),
    ]
)
_PATHS = st.lists(st.one_of(_NAMES, st.text(max_size=12)), max_size=DEPTH).map("/".join)
_CONTENT = st.one_of(st.just("written"), st.text(max_size=20))


def _sandbox(root: Path) -> Path:
    """Build the outside world and the workspace in `root`; return the workspace."""
    level = root
    for index in range(1, DEPTH):
        level = level / f"l{index}"
        level.mkdir()
        (level / HIDDEN).write_text(SECRET.ljust(7777, "."))
    outside = level / "outside"
    (outside / "sub").mkdir(parents=True)
    for folder in (root, outside, outside / "sub"):
        (folder / "secret.txt").write_text(SECRET.ljust(7777, "."))
        (folder / HIDDEN).write_text(SECRET.ljust(7777, "."))
    (level / "ws_evil").mkdir()
    (level / "ws_evil" / "secret.txt").write_text(SECRET.ljust(7777, "."))

    ws = level / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "file.txt").write_text("inside")
    (ws / "sub" / "file.txt").write_text("inside too")
    (ws / "link_file").symlink_to(outside / "secret.txt")
    (ws / "link_dir").symlink_to(outside, target_is_directory=True)
    (ws / "link_hop").symlink_to(ws / "link_dir")
    (ws / "link_in").symlink_to(ws / "file.txt")
    (ws / "dangling").symlink_to(outside / "new.txt")
    (ws / "sub" / "up").symlink_to("../..")
    (ws / "loop").symlink_to(ws / "loop")
    return ws


def _snapshot(top: Path, skip: Path | None = None) -> dict:
    """Every entry under `top` (but not under `skip`): its kind and content or link target."""
    state = {}
    for folder, dirs, files in os.walk(top):
        if skip is not None and Path(folder) == skip:
            dirs.clear()
            state[folder] = "the workspace"
            continue
        for name in dirs + files:
            path = Path(folder) / name
            if path.is_symlink():
                state[str(path)] = ("link", os.readlink(path))
            elif path.is_dir():
                state[str(path)] = ("folder",)
            else:
                state[str(path)] = ("file", path.read_bytes(), path.stat().st_mode)
    return state


def _expand(path: str, ws: Path) -> str:
    outside = ws.parent / "outside"
    sandbox = ws.parents[DEPTH - 1]
    return path.replace(WS, str(ws)).replace(OUTSIDE, str(outside)).replace(SANDBOX, str(sandbox))


@settings(max_examples=400, deadline=None, database=None)
@given(tool=st.sampled_from(["read_file", "list_dir", "write_file"]), path=_PATHS, content=_CONTENT)
def test_no_path_reaches_outside_the_workspace(tool, path, content):
    with tempfile.TemporaryDirectory(dir=SCRATCH) as temp:
        ws = _sandbox(Path(temp))
        path = _expand(path, ws)
        outside_before = _snapshot(Path(temp), skip=ws)
        inside_before = _snapshot(ws)
        space = Workspace(ws)
        call = {
            "read_file": lambda: space.read_file(path),
            "list_dir": lambda: space.list_dir(path),
            "write_file": lambda: space.write_file(path, content),
        }[tool]
        try:
            text = call()
        except ToolError as error:
            text, failed = str(error), True
        else:
            failed = False
        assert isinstance(text, str) and text
        assert _snapshot(Path(temp), skip=ws) == outside_before
        assert SECRET not in text and SECRET_SIZE not in text and HIDDEN not in text
        if failed and tool == "write_file":
            assert _snapshot(ws) == inside_before  # a refused or failed write leaves no trace
