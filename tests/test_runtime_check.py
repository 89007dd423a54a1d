"""The embedded runtime is checked in a child process before a run depends on it: a llama.cpp build that dies by a
signal on this CPU (as one compiled for AMX does on a virtual machine that traps it) stops the run with exit 2 and
one line that names the rebuild command, once per build.

The crashing build is tests/crashing_runtime/llama_cpp, a stand-in whose model kills its process with the signal
at load; the real runtime, where it is installed, is checked the same way and passes."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent.models.runtime_check import build_id, check_runtime, rebuild_command
from tests.support import child_env

CRASHING = Path(__file__).parent / "crashing_runtime"
PROJECT = Path(__file__).resolve().parent.parent


def agent_with(runtime: Path, tmp_path: Path, log: Path, signal: str = "SEGV") -> subprocess.CompletedProcess:
    model = tmp_path / "model.gguf"
    if not model.exists():  # the same file each time: a changed one is another model, checked again
        model.write_bytes(b"GGUF")
    env = child_env(PYTHONPATH=f"{runtime}{os.pathsep}{PROJECT}", AGENT_CACHE_DIR=str(tmp_path / "cache"),
                    CRASH_LOG=str(log), CRASH_SIGNAL=signal)
    return subprocess.run([sys.executable, "-m", "agent", "--model-path", str(model), "Compute 2+2"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("signal, name", [("SEGV", "SIGSEGV, segmentation fault"),
                                          ("ILL", "SIGILL, illegal instruction")])
def test_a_runtime_that_crashes_on_this_cpu_stops_the_run_with_one_line_naming_the_rebuild(tmp_path, signal, name):
    done = agent_with(CRASHING, tmp_path, tmp_path / "loads.log", signal)
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"agent: the embedded model's runtime (llama.cpp) crashed on this CPU ({name})")
    assert lines[0].endswith(rebuild_command("0.3.36"))
    assert "CMAKE_ARGS='-DCMAKE_C_FLAGS=\"-mno-amx-tile -mno-amx-int8 -mno-amx-bf16\"" in lines[0]
    assert (tmp_path / "loads.log").read_text().count("\n") == 1  # one child, which crashed; the run never loaded


def test_the_verdict_is_kept_per_build_so_the_check_runs_once(tmp_path):
    log = tmp_path / "loads.log"
    first, second = agent_with(CRASHING, tmp_path, log), agent_with(CRASHING, tmp_path, log)
    assert (first.returncode, second.returncode) == (2, 2)
    assert first.stderr == second.stderr
    assert log.read_text().count("\n") == 1  # the second run read the verdict
    rebuilt = tmp_path / "rebuilt"
    shutil.copytree(CRASHING, rebuilt)
    with open(rebuilt / "llama_cpp" / "__init__.py", "a") as source:
        source.write("# built again\n")
    assert agent_with(rebuilt, tmp_path, log).returncode == 2
    assert log.read_text().count("\n") == 2  # another build: checked again


def test_the_build_is_its_version_and_its_libraries_bytes(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "libllama.so").write_bytes(b"one")
    first = build_id(tmp_path, "0.3.36")
    assert build_id(tmp_path, "0.3.37") != first
    (tmp_path / "lib" / "libllama.so").write_bytes(b"two")
    assert build_id(tmp_path, "0.3.36") != first


def test_a_check_that_fails_without_a_crash_decides_nothing(tmp_path):
    """A file llama.cpp cannot load exits the child with an error, not a signal: no verdict is kept, and the load
    itself reports the file (as it did before the check)."""
    llama_cpp = pytest.importorskip("llama_cpp")
    model = tmp_path / "not-a-model.gguf"
    model.write_text("hello")
    build = build_id(Path(llama_cpp.__file__).parent, llama_cpp.__version__)
    check_runtime(model, "user", build, llama_cpp.__version__, tmp_path / "runtime", 1)
    assert not (tmp_path / "runtime").exists()


def test_the_installed_runtime_passes_its_check_and_the_verdict_is_kept(tmp_path):
    llama_cpp = pytest.importorskip("llama_cpp")
    from agent.models.local_files import DEFAULT, cache_dir

    model = cache_dir(os.environ) / DEFAULT.name
    if not model.is_file():
        pytest.skip("the default local model has not been assembled")
    build = build_id(Path(llama_cpp.__file__).parent, llama_cpp.__version__)
    check_runtime(model, DEFAULT.sha256, build, llama_cpp.__version__, tmp_path / "runtime", 2)
    [verdict] = (tmp_path / "runtime").iterdir()
    assert json.loads(verdict.read_text()) == {"signal": 0}
