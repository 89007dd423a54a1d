import os
import shutil
import tempfile

import pytest

from agent.tools import Registry
from agent.tools.files import MAX_LIST_ENTRIES, MAX_NAMED, MAX_READ_BYTES, MAX_SCANNED, MAX_WRITE_CHARS, atomic_write, file_tools

NOBODY = 65534


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def files(ws):
    """The file tools, replacing files without asking (the tests of approval build their own)."""
    registry = Registry(file_tools(ws, approve=lambda request: True))
    return lambda name, **arguments: registry.call(name, arguments).text


def test_workspace_must_exist(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        file_tools(tmp_path / "missing")


def test_write_then_read(files, ws):
    assert files("write_file", path="notes.txt", content="héllo\n") == "wrote 6 characters to notes.txt"
    assert (ws / "notes.txt").read_text(encoding="utf-8") == "héllo\n"
    assert files("read_file", path="notes.txt") == "héllo\n"


def test_write_creates_parent_folders(files, ws):
    assert files("write_file", path="out/deep/report.txt", content="ok") == "wrote 2 characters to out/deep/report.txt"
    assert (ws / "out" / "deep" / "report.txt").read_text() == "ok"


def test_absolute_paths_inside_the_workspace_are_fine(files, ws):
    (ws / "a.txt").write_text("inside")
    assert files("read_file", path=str(ws / "a.txt")) == "inside"


def test_read_decodes_invalid_utf8_with_replacement(files, ws):
    (ws / "bin.dat").write_bytes(b"ok\xff")
    assert files("read_file", path="bin.dat") == "ok\ufffd"


def test_missing_file_and_directory_messages(files, ws):
    (ws / "sub").mkdir()
    assert files("read_file", path="sub/notes.txt") == "error: file not found: sub/notes.txt (its folder is empty)"
    assert files("read_file", path="no/notes.txt") == \
        "error: file not found: no/notes.txt (its folder no does not exist either); the workspace has: sub/"
    (ws / "a.txt").write_text("x")
    assert files("read_file", path="a.txt/b.txt") == \
        "error: file not found: a.txt/b.txt (a.txt is a file, not a folder); the workspace has: a.txt, sub/"
    assert files("read_file", path="sub") == "error: sub is a directory; use list_dir to see its contents"
    assert files("read_file", path=".") == "error: . is a directory; use list_dir to see its contents"


def test_a_missing_file_is_answered_with_the_names_its_folder_holds_closest_first(files, ws):
    for name in ["part1.txt", "part2.txt", "notes.md", "zebra.csv"]:
        (ws / name).write_text("x")
    (ws / "notes").mkdir()
    (ws / "notes" / "a.txt").write_text("x")
    assert files("read_file", path="part9.txt") == \
        "error: file not found: part9.txt; the workspace has: part1.txt, part2.txt, notes.md, zebra.csv, notes/"
    assert files("read_file", path="notes.txt").startswith("error: file not found: notes.txt; the workspace has: notes.md, ")
    assert files("read_file", path="notes/b.txt") == "error: file not found: notes/b.txt; notes has: a.txt"


def test_a_missing_file_or_folder_is_answered_with_where_its_name_is(files, ws):
    (ws / "docs" / "2026").mkdir(parents=True)
    (ws / "docs" / "Notes.txt").write_text("x")
    (ws / "docs" / "2026" / "notes.txt").write_text("x")
    (ws / "reports").mkdir()
    assert files("read_file", path="notes.txt") == \
        "error: file not found: notes.txt; a file of that name is at docs/Notes.txt, docs/2026/notes.txt"
    assert files("read_file", path="reports/2026") == "error: file not found: reports/2026 (its folder is empty)"
    assert files("list_dir", path="2026") == "error: folder not found: 2026; a folder of that name is at docs/2026/"
    assert files("list_dir", path="notes.txt").startswith("error: folder not found: notes.txt; the workspace has:")


def test_the_look_for_a_name_elsewhere_enters_no_link_and_no_hidden_folder(files, ws, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "key.txt").write_text("secret")
    (ws / "away").symlink_to(outside, target_is_directory=True)
    (ws / "key.txt.link").symlink_to(outside / "key.txt")
    (ws / ".git").mkdir()
    (ws / ".git" / "key.txt").write_text("x")
    assert files("read_file", path="key.txt") == "error: file not found: key.txt; the workspace has: " \
        "key.txt.link, .git/, away"


def test_the_look_for_a_name_elsewhere_is_bounded(files, ws):
    for i in range(MAX_SCANNED):
        (ws / f"d{i:04}").mkdir()
    (ws / "d0000" / "deep.txt").write_text("x")  # one level down, past the entries looked at
    error = files("read_file", path="deep.txt")
    assert error.startswith("error: file not found: deep.txt; the workspace has: ") and "d0000/deep.txt" not in error


def test_a_missing_file_in_a_huge_folder_names_a_few_after_a_bounded_look(files, ws):
    for i in range(MAX_SCANNED + 50):
        (ws / f"{'r' * 200}{i}").touch()
    error = files("read_file", path="report.txt")
    assert error.endswith(f" and {MAX_SCANNED - MAX_NAMED}+ more")
    assert error.count(", ") == MAX_NAMED - 1 and len(error) < MAX_NAMED * 220


@pytest.mark.parametrize("tool_name", ["read_file", "write_file", "list_dir"])
@pytest.mark.parametrize("path", ["../secret.txt", "sub/../../secret.txt", "/etc/passwd", "../ws_evil/secret.txt"])
def test_paths_outside_the_workspace_are_refused(files, ws, tool_name, path):
    evil = ws.parent / "ws_evil"
    evil.mkdir(exist_ok=True)
    (evil / "secret.txt").write_text("secret")
    (ws.parent / "secret.txt").write_text("secret")
    arguments = {"path": path, "content": "x"} if tool_name == "write_file" else {"path": path}
    text = files(tool_name, **arguments)
    assert text == f"error: path {path!r} is outside the workspace; use a path inside it, like notes.txt"
    assert (evil / "secret.txt").read_text() == "secret"
    assert (ws.parent / "secret.txt").read_text() == "secret"


def test_symlinks_that_leave_the_workspace_are_refused(files, ws, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (ws / "link.txt").symlink_to(outside / "secret.txt")
    (ws / "linkdir").symlink_to(outside, target_is_directory=True)
    (ws / "dangling.txt").symlink_to(outside / "new.txt")

    for path in ["link.txt", "linkdir/secret.txt", "linkdir"]:
        assert "is outside the workspace" in files("read_file", path=path)
        assert "is outside the workspace" in files("list_dir", path=path)
    for path in ["link.txt", "linkdir/new.txt", "dangling.txt"]:
        assert "is outside the workspace" in files("write_file", path=path, content="pwned")
    assert (outside / "secret.txt").read_text() == "secret"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_symlinks_inside_the_workspace_are_followed(files, ws):
    (ws / "real.txt").write_text("real")
    (ws / "alias.txt").symlink_to(ws / "real.txt")
    assert files("read_file", path="alias.txt") == "real"


def test_null_byte_is_refused(files):
    assert files("read_file", path="a\0b").startswith("error: path contains a null byte")


def test_fifo_is_refused_without_blocking(files, ws):
    os.mkfifo(ws / "pipe")
    assert files("read_file", path="pipe") == (
        "error: pipe is not a regular file (a device, pipe or socket); only regular files can be read"
    )


def test_device_through_a_symlink_is_refused(files, ws):
    (ws / "zero").symlink_to("/dev/zero")
    text = files("read_file", path="zero")
    assert "outside the workspace" in text or "not a regular file" in text


def test_read_size_is_limited(files, ws):
    (ws / "big.log").write_bytes(b"x" * (MAX_READ_BYTES + 1))
    assert files("read_file", path="big.log") == (
        f"error: big.log is too large to read ({MAX_READ_BYTES + 1:,} bytes; the limit is {MAX_READ_BYTES:,} bytes)"
    )


def test_write_size_is_limited(files, ws):
    text = files("write_file", path="big.txt", content="x" * (MAX_WRITE_CHARS + 1))
    assert text.startswith("error: content too large")
    assert not (ws / "big.txt").exists()


def test_failed_write_keeps_the_old_file_and_leaves_no_temp_file(files, ws):
    (ws / "keep.txt").write_text("old")
    text = files("write_file", path="keep.txt", content="new \ud800 text")
    assert text.startswith("error: content cannot be saved as UTF-8")
    assert "keep.txt was not changed" in text
    assert (ws / "keep.txt").read_text() == "old"
    assert sorted(p.name for p in ws.iterdir()) == ["keep.txt"]


def test_write_replaces_atomically_and_keeps_the_mode(files, ws):
    (ws / "run.sh").write_text("old")
    (ws / "run.sh").chmod(0o750)
    assert files("write_file", path="run.sh", content="new") == "wrote 3 characters to run.sh"
    assert (ws / "run.sh").read_text() == "new"
    assert (ws / "run.sh").stat().st_mode & 0o777 == 0o750
    assert sorted(p.name for p in ws.iterdir()) == ["run.sh"]


def test_write_onto_a_directory_is_refused(files, ws):
    (ws / "out").mkdir()
    assert files("write_file", path="out", content="x") == (
        "error: out is a directory; choose a file name inside it, like out/notes.txt"
    )


def test_list_dir_formatting(files, ws):
    (ws / "b.txt").write_text("12345")
    (ws / "a_dir").mkdir()
    (ws / "c.md").write_text("")
    assert files("list_dir") == "a_dir/\nb.txt (5 bytes)\nc.md (0 bytes)"
    assert files("list_dir", path="a_dir") == "(empty folder)"


def test_list_dir_is_capped(files, ws):
    for i in range(MAX_LIST_ENTRIES + 5):
        (ws / f"f{i:03}").touch()
    lines = files("list_dir").splitlines()
    assert len(lines) == MAX_LIST_ENTRIES + 1
    assert lines[0] == "f000 (0 bytes)"
    assert lines[-1] == "... and 5 more entries"


def test_list_dir_errors(files, ws):
    (ws / "a.txt").write_text("x")
    assert files("list_dir", path="nope") == "error: folder not found: nope; the workspace has: a.txt"
    assert files("list_dir", path="workspace/docs") == \
        "error: folder not found: workspace/docs (its folder workspace does not exist either); the workspace has: a.txt"
    assert files("list_dir", path="a.txt") == "error: a.txt is a file, not a folder; use read_file to read it"


def test_list_dir_hides_what_links_outside_point_to(files, ws, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("12345678")
    (ws / "real.txt").write_text("abc")
    (ws / "alias.txt").symlink_to(ws / "real.txt")
    (ws / "out.txt").symlink_to(outside / "secret.txt")
    (ws / "outdir").symlink_to(outside, target_is_directory=True)
    (ws / "out_missing").symlink_to(outside / "missing.txt")
    (ws / "hop").symlink_to(ws / "out.txt")
    (ws / "loop").symlink_to(ws / "loop")
    (ws / "dangling").symlink_to(ws / "missing.txt")
    assert files("list_dir").splitlines() == [
        "alias.txt (3 bytes)",
        "dangling (broken link)",
        "hop -> (outside the workspace)",
        "loop (broken link)",
        "out.txt -> (outside the workspace)",
        "out_missing -> (outside the workspace)",
        "outdir -> (outside the workspace)",
        "real.txt (3 bytes)",
    ]


def test_write_leaves_a_read_only_file_unchanged(files, ws):
    """Renaming over a file needs only the folder's permission: the file's own permission is checked first."""
    sandbox = tempfile.mkdtemp()  # tmp_path sits in a folder only root may enter
    try:
        space = os.path.join(sandbox, "ws")
        os.mkdir(space)
        with open(os.path.join(space, "ro.txt"), "w") as file:
            file.write("old")
        os.chmod(os.path.join(space, "ro.txt"), 0o444)
        registry = Registry(file_tools(space, approve=lambda request: True))
        if os.geteuid() == 0:  # root may write any file: drop to nobody, who owns the folder and the file
            for path in (sandbox, space, os.path.join(space, "ro.txt")):
                os.chown(path, NOBODY, NOBODY)
            text = _as_nobody(lambda: registry.call("write_file", {"path": "ro.txt", "content": "new"}).text)
        else:
            text = registry.call("write_file", {"path": "ro.txt", "content": "new"}).text
        assert text == (
            "error: cannot write ro.txt: the file is read-only for this user; "
            "it was not changed (write to another file)"
        )
        with open(os.path.join(space, "ro.txt")) as file:
            assert file.read() == "old"
        assert os.listdir(space) == ["ro.txt"]
    finally:
        shutil.rmtree(sandbox)


def _as_nobody(function):
    """The text `function` returns when run by the user nobody in a forked child."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            os.write(write_end, function().encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        text = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    assert status == 0, "the child running as nobody failed"
    return text


def test_atomic_write_refuses_a_read_only_file_for_other_users(tmp_path):
    target = tmp_path / "report.json"
    target.write_text("old")
    target.chmod(0o444)
    if os.geteuid() == 0:
        atomic_write(target, "new")  # root may write a read-only file, with or without the rename
        assert target.read_text() == "new"
    else:
        with pytest.raises(PermissionError):
            atomic_write(target, "new")
        assert target.read_text() == "old"


def test_names_up_to_the_limit_work(files, ws):
    for name in ["x" * 255, "é" * 127 + "x"]:  # 255 bytes each
        assert files("write_file", path=name, content="ok") == f"wrote 2 characters to {name}"
        assert files("read_file", path=name) == "ok"
    assert files("list_dir").splitlines() == ["x" * 255 + " (2 bytes)", "é" * 127 + "x (2 bytes)"]
    assert files("write_file", path="x" * 255, content="again") == f"wrote 5 characters to {'x' * 255}"
    assert sorted(p.name for p in ws.iterdir()) == ["x" * 255, "é" * 127 + "x"]


@pytest.mark.parametrize("tool_name", ["read_file", "write_file", "list_dir"])
@pytest.mark.parametrize(
    "path",
    ["x" * 256, "é" * 128, "new/" + "x" * 256 + "/f.txt", "new/deeper/" + "x" * 300],
    ids=["256-bytes", "256-bytes-accented", "long-folder", "long-file-in-new-folders"],
)
def test_names_over_the_limit_are_refused_clearly(files, ws, tool_name, path):
    arguments = {"path": path, "content": "x"} if tool_name == "write_file" else {"path": path}
    text = files(tool_name, **arguments)
    long_name = next(part for part in path.split("/") if len(part.encode()) > 255)
    assert text == (
        f"error: name too long: {long_name[:40]!r}... is {len(long_name.encode())} bytes "
        "(the limit is 255 bytes per file or folder name); use a shorter name"
    )
    assert list(ws.iterdir()) == []


def test_a_failed_write_removes_the_folders_it_created(files, ws):
    text = files("write_file", path="a/b/c/f.txt", content="bad \ud800")
    assert text.startswith("error: content cannot be saved as UTF-8")
    assert list(ws.iterdir()) == []


def test_a_failed_write_keeps_the_folders_that_existed(files, ws):
    (ws / "a").mkdir()
    (ws / "a" / "keep.txt").write_text("x")
    text = files("write_file", path="a/b/c/f.txt", content="bad \ud800")
    assert text.startswith("error: content cannot be saved as UTF-8")
    assert sorted(str(p.relative_to(ws)) for p in ws.rglob("*")) == ["a", "a/keep.txt"]


def test_a_folder_that_cannot_be_created(files, ws):
    (ws / "a.txt").write_text("x")
    text = files("write_file", path="a.txt/new/f.txt", content="x")
    assert text == "error: cannot create the folder a.txt/new: Not a directory; nothing was written"
    assert sorted(p.name for p in ws.iterdir()) == ["a.txt"]


def test_paths_with_lone_surrogates(files, ws):
    assert files("write_file", path="caf\udce9.txt", content="x") == "wrote 1 characters to caf\udce9.txt"
    assert (ws / os.fsdecode(b"caf\xe9.txt")).exists()
    assert files("read_file", path="bad\ud800.txt") == (
        "error: path contains characters that cannot be a file name (lone surrogates); use plain text"
    )


@pytest.mark.parametrize("tool_name", ["read_file", "write_file", "list_dir"])
def test_a_path_longer_than_the_system_allows_is_refused_clearly(files, ws, tool_name):
    path = "/".join(["x" * 255] * 20)
    arguments = {"path": path, "content": "x"} if tool_name == "write_file" else {"path": path}
    total = len(os.fsencode(ws / path))
    assert files(tool_name, **arguments) == (
        f"error: path too long: {total:,} bytes with the workspace folder (the limit is 4,096 bytes); "
        "use a shorter path"
    )
    assert list(ws.iterdir()) == []


def test_replacing_a_file_asks_first_and_a_refusal_leaves_it(ws):
    asked = []
    answers = iter([False, True])

    def approve(request):
        asked.append(request)
        return next(answers)

    registry = Registry(file_tools(ws, approve))
    (ws / "notes.txt").write_text("old notes\n")
    assert registry.call("write_file", {"path": "notes.txt", "content": "new"}).text == \
        "error: the user declined to replace notes.txt; write to a new file, or ask the user"
    assert (ws / "notes.txt").read_text() == "old notes\n"
    assert registry.call("write_file", {"path": "notes.txt", "content": "new"}).text == "wrote 3 characters to notes.txt"
    assert asked == ["write_file to replace notes.txt (10 bytes) with 3 characters"] * 2
    assert registry.call("write_file", {"path": "fresh.txt", "content": "x"}).ok  # a new file: nothing to ask
    assert registry.call("write_file", {"path": "notes.txt", "content": "new"}).ok  # the same content: likewise
    assert len(asked) == 2


def test_without_an_approver_a_file_is_never_replaced(ws):
    registry = Registry(file_tools(ws))
    (ws / "notes.txt").write_text("old")
    assert registry.call("write_file", {"path": "notes.txt", "content": "new"}).text == \
        "error: notes.txt exists, and this run may not replace files; write to a new file instead"
    assert (ws / "notes.txt").read_text() == "old"
    assert registry.call("write_file", {"path": "other.txt", "content": "new"}).ok
    assert "A file that exists is not replaced" in registry.get("write_file").description
