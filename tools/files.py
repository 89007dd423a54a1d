"""read_file, write_file and list_dir, confined to one workspace folder."""

from __future__ import annotations

import collections
import contextlib
import difflib
import errno
import itertools
import os
import stat
import tempfile
from pathlib import Path
from typing import Callable

from .registry import Tool, ToolError, tool

MAX_READ_BYTES = 1_000_000
MAX_WRITE_CHARS = 1_000_000
MAX_LIST_ENTRIES = 200
MAX_NAMED = 12  # names a 'file not found' error offers instead
MAX_SCANNED = 1000  # entries it reads to find them
MAX_ELSEWHERE = 3  # paths of the same name it gives, from anywhere in the workspace
NAME_MAX = 255  # bytes in one file or folder name, when the file system does not say
PATH_MAX = 4096  # bytes in a whole path, likewise

_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


class Workspace:
    """A folder the file tools may not leave; paths are resolved (symlinks included) before every check."""

    def __init__(self, root: str | os.PathLike):
        path = Path(root)
        if not path.is_dir():
            raise ValueError(f"workspace folder {str(path)!r} does not exist or is not a folder; create it first")
        self.root = path.resolve()
        self.name_max = _pathconf(self.root, "PC_NAME_MAX", NAME_MAX)
        self.path_max = _pathconf(self.root, "PC_PATH_MAX", PATH_MAX)

    def resolve(self, path: str) -> Path:
        """The real path for `path` (relative to the workspace, or absolute inside it)."""
        if "\0" in path:
            raise ToolError("path contains a null byte; use a plain relative path like notes.txt")
        try:
            os.fsencode(path)
        except UnicodeEncodeError:
            raise ToolError(
                "path contains characters that cannot be a file name (lone surrogates); use plain text"
            ) from None
        try:
            resolved = (self.root / path).resolve()
        except (OSError, RuntimeError) as error:
            raise ToolError(f"cannot resolve path {path!r}: {error}") from None
        if not self.contains(resolved):
            raise ToolError(f"path {path!r} is outside the workspace; use a path inside it, like notes.txt")
        self._require_short(resolved)
        return resolved

    def _require_short(self, resolved: Path) -> None:
        """Refuse names and paths the file system could not hold, before anything is created."""
        for name in resolved.relative_to(self.root).parts:
            size = len(os.fsencode(name))
            if size > self.name_max:
                raise ToolError(
                    f"name too long: {name[:40]!r}... is {size} bytes "
                    f"(the limit is {self.name_max} bytes per file or folder name); use a shorter name"
                )
        size = len(os.fsencode(resolved))
        if size >= self.path_max:
            raise ToolError(
                f"path too long: {size:,} bytes with the workspace folder (the limit is {self.path_max:,} bytes); "
                "use a shorter path"
            )

    def contains(self, resolved: Path) -> bool:
        """Whether a resolved path is the workspace or inside it (path semantics, not a string prefix)."""
        return resolved == self.root or self.root in resolved.parents

    def show(self, resolved: Path) -> str:
        """A resolved path as shown to the model: relative to the workspace."""
        return resolved.relative_to(self.root).as_posix()

    def read_file(self, path: str) -> str:
        target = self.resolve(path)
        shown = self.show(target)
        info = self._stat(target, lambda: self._missing(target, shown))
        if stat.S_ISDIR(info.st_mode):
            raise ToolError(f"{shown} is a directory; use list_dir to see its contents")
        _require_regular(info.st_mode, shown)
        _require_small(info.st_size, shown)
        try:
            fd = os.open(target, _OPEN_FLAGS)
        except OSError as error:
            raise ToolError(f"cannot read {shown}: {error.strerror}") from None
        with os.fdopen(fd, "rb") as file:
            _require_regular(os.fstat(file.fileno()).st_mode, shown)
            data = file.read(MAX_READ_BYTES + 1)
        _require_small(len(data), shown)
        return data.decode("utf-8", errors="replace")

    def write_file(self, path: str, content: str) -> str:
        target = self.resolve(path)
        shown = self.show(target)
        if len(content) > MAX_WRITE_CHARS:
            raise ToolError(
                f"content too large ({len(content):,} characters; the limit is {MAX_WRITE_CHARS:,}); "
                "split it into several files"
            )
        if os.path.isdir(target):
            raise ToolError(f"{shown} is a directory; choose a file name inside it, like {shown}/notes.txt")
        missing: list[Path] = []  # the folders to create, outermost first; removed again if the write fails
        folder = target.parent
        while not os.path.exists(folder):
            missing.insert(0, folder)
            folder = folder.parent
        created: list[Path] = []
        try:
            for folder in missing:
                try:
                    folder.mkdir()
                except OSError as error:
                    raise ToolError(
                        f"cannot create the folder {self.show(folder)}: {error.strerror}; nothing was written"
                    ) from None
                created.append(folder)
            _write(target, shown, content)
        except BaseException:
            for folder in reversed(created):
                with contextlib.suppress(OSError):
                    folder.rmdir()
            raise
        return f"wrote {len(content)} characters to {shown}"

    def list_dir(self, path: str = ".") -> str:
        target = self.resolve(path)
        shown = self.show(target)
        info = self._stat(target, lambda: self._missing(target, shown, "folder"))
        if not stat.S_ISDIR(info.st_mode):
            raise ToolError(f"{shown} is a file, not a folder; use read_file to read it")
        try:
            names = sorted(os.listdir(target))
        except OSError as error:
            raise ToolError(f"cannot list {shown}: {error.strerror}") from None
        if not names:
            return "(empty folder)"
        lines = [self._entry(target / name) for name in names[:MAX_LIST_ENTRIES]]
        if len(names) > MAX_LIST_ENTRIES:
            lines.append(f"... and {len(names) - MAX_LIST_ENTRIES} more entries")
        return "\n".join(lines)

    def _entry(self, path: Path) -> str:
        """One list_dir line: 'name/' for a folder, 'name (N bytes)' for a file.

        A link that leads outside the workspace is marked and nothing is said of its target.
        """
        try:
            if not self.contains(path.resolve()):
                return f"{path.name} -> (outside the workspace)"
            info = os.stat(path)
        except (OSError, RuntimeError):
            return f"{path.name} (broken link)"
        if stat.S_ISDIR(info.st_mode):
            return f"{path.name}/"
        if stat.S_ISREG(info.st_mode):
            return f"{path.name} ({info.st_size:,} bytes)"
        return f"{path.name} (not a regular file)"

    def _missing(self, target: Path, shown: str, kind: str = "file") -> str:
        """'file not found' (or 'folder not found'), with where that name is elsewhere in the workspace, or else
        the names the nearest folder there does hold (the closest first), so that a model can correct the path
        without list_dir. Bounded: at most MAX_SCANNED entries are read for each, MAX_NAMED named."""
        head = f"{kind} not found: {shown}"
        elsewhere = self._same_name(target.name, kind == "folder")
        if elsewhere:
            return f"{head}; a {kind} of that name is at {', '.join(elsewhere)}"
        folder = target.parent  # the workspace or inside it: `target` is
        while not folder.is_dir() and folder != self.root:
            folder = folder.parent
        if folder != target.parent:
            parent = self.show(target.parent)
            head += f" ({parent} is a file, not a folder)" if target.parent.exists() else \
                f" (its folder {parent} does not exist either)"
        try:
            with os.scandir(folder) as entries:
                names = [e.name + "/" * e.is_dir(follow_symlinks=False) for e in itertools.islice(entries, MAX_SCANNED)]
        except OSError:  # a folder that cannot be read: nothing to say of what it holds
            return head
        where = "the workspace" if folder == self.root else self.show(folder)
        if not names:
            return f"{head}; {where} is empty" if folder != target.parent else f"{head} (its folder is empty)"
        similarity = {n: difflib.SequenceMatcher(None, target.name, n).ratio() for n in names}
        named = sorted(names, key=lambda n: (-similarity[n], n))[:MAX_NAMED]
        rest = len(names) - len(named)
        more = f" and {rest}{'+' if len(names) == MAX_SCANNED else ''} more" if rest else ""
        return f"{head}; {where} has: {', '.join(named)}{more}"

    def _same_name(self, name: str, folder: bool) -> list[str]:
        """The workspace paths of files (or folders) called ``name`` (case aside), shallowest first: at most
        MAX_ELSEWHERE, after reading at most MAX_SCANNED entries; links are neither named nor followed, hidden folders
        not entered."""
        found: list[str] = []
        queue, scanned = collections.deque([self.root]), 0
        while queue and scanned < MAX_SCANNED and len(found) < MAX_ELSEWHERE:
            try:
                with os.scandir(queue.popleft()) as entries:
                    for entry in itertools.islice(entries, MAX_SCANNED - scanned):
                        scanned += 1
                        if entry.is_symlink():
                            continue
                        is_dir = entry.is_dir(follow_symlinks=False)
                        if entry.name.casefold() == name.casefold() and is_dir == folder:
                            found.append(self.show(Path(entry.path)) + "/" * is_dir)
                        if is_dir and not entry.name.startswith("."):
                            queue.append(Path(entry.path))
            except OSError:  # a folder that cannot be read: looked past
                continue
        return found[:MAX_ELSEWHERE]

    def _stat(self, target: Path, missing: Callable[[], str]) -> os.stat_result:
        try:
            return os.stat(target)
        except (FileNotFoundError, NotADirectoryError):
            raise ToolError(missing()) from None
        except OSError as error:
            raise ToolError(f"cannot access {self.show(target)}: {error.strerror}") from None


def _pathconf(path: Path, name: str, default: int) -> int:
    try:
        return os.pathconf(path, name)
    except (OSError, ValueError):
        return default


def _write(target: Path, shown: str, content: str) -> None:
    try:
        atomic_write(target, content)
    except UnicodeEncodeError as error:
        raise ToolError(
            f"content cannot be saved as UTF-8 ({error.reason} at character {error.start}); {shown} was not changed"
        ) from None
    except PermissionError as error:
        raise ToolError(f"cannot write {shown}: {error.strerror}; it was not changed (write to another file)") from None
    except OSError as error:
        raise ToolError(f"cannot write {shown}: {error.strerror or error}; the file was not changed") from None


def _require_regular(mode: int, shown: str) -> None:
    if not stat.S_ISREG(mode):
        raise ToolError(f"{shown} is not a regular file (a device, pipe or socket); only regular files can be read")


def _require_small(size: int, shown: str) -> None:
    if size > MAX_READ_BYTES:
        raise ToolError(f"{shown} is too large to read ({size:,} bytes; the limit is {MAX_READ_BYTES:,} bytes)")


def atomic_write(target: Path, content: str, mode: int | None = None) -> None:
    """Write to a temporary file next to `target`, then rename it over `target`; on failure leave no trace.
    The file keeps its permissions (a new one gets 0o644), unless ``mode`` is given.

    A file the user may not write is refused (PermissionError), though the rename alone would replace it.
    """
    keep = 0o644
    if target.is_file():
        if not os.access(target, os.W_OK):
            raise PermissionError(errno.EACCES, "the file is read-only for this user", str(target))
        keep = stat.S_IMODE(os.stat(target).st_mode)
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=".tmp")  # short: the target's name may be at the limit
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as file:
            file.write(content)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temp, keep if mode is None else mode)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def file_tools(workspace: str | os.PathLike, approve: Callable[[str], bool] | None = None) -> list[Tool]:
    """read_file, write_file and list_dir for one workspace folder (which must exist). ``approve(request) -> bool``
    is asked before write_file replaces a file that exists; without it, replacing is refused."""
    space = Workspace(workspace)

    def write_file(path: str, content: str) -> str:
        target = space.resolve(path)
        if target.is_file() and not _holds(target, content):
            shown, size = space.show(target), target.stat().st_size
            if approve is None:
                raise ToolError(f"{shown} exists, and this run may not replace files; write to a new file instead")
            if not approve(f"write_file to replace {shown} ({size:,} bytes) with {len(content):,} characters"):
                raise ToolError(f"the user declined to replace {shown}; write to a new file, or ask the user")
        return space.write_file(path, content)

    return [
        tool(space.read_file, name="read_file",
             description="Read a text file of the workspace; path is relative to the workspace folder.",
             hint="Only the files of the workspace exist: read a file before you say what it holds."),
        tool(
            write_file,
            name="write_file",
            description="Create or overwrite a text file with content; parent folders are created." if approve
            else "Create a text file with content; parent folders are created. A file that exists is not replaced.",
            hint="A file is written only by calling write_file; never say you wrote one without calling it.",
            asks="before replacing a file" if approve else "",
            writes=True,
        ),
        tool(
            space.list_dir,
            name="list_dir",
            description="List a workspace folder (default: the top one); sub-folders end with '/', "
            "files show their size, links that lead outside the workspace are marked '-> (outside the workspace)' "
            "and cannot be used.",
            hint="Use list_dir when you do not know a file's name.",
        ),
    ]


def _holds(target: Path, content: str) -> bool:
    """Whether the file already holds exactly ``content`` (replacing it changes nothing)."""
    try:
        data = content.encode("utf-8")
        return target.stat().st_size == len(data) and target.read_bytes() == data
    except (OSError, UnicodeEncodeError):
        return False
