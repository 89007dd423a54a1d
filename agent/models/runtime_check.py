"""Whether the installed llama.cpp runs on this CPU, found out once per build in a child process.

llama-cpp-python compiles llama.cpp for the machine it is installed on (``-march=native``). Some virtual machines
announce instructions they trap (AMX): such a build dies by a signal at its first matrix product, taking the
process with it and printing nothing. A child that loads the model and evaluates a few tokens finds that out
without risking the user's run; the verdict is kept per build and model, so it costs one load, once.
"""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from agent.config import ConfigError

CRASHES: dict[int, str] = {signal.SIGSEGV: "segmentation fault", signal.SIGILL: "illegal instruction",
                           signal.SIGBUS: "bus error"}
CHECK_SECONDS = 300  # loading 1.1 GB from a cold disk and evaluating a few tokens on a slow machine
NO_AMX = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
# what the child runs: llama.cpp alone, none of the agent's code; a few tokens in one batch, then two one by one
CHILD = """import sys
import llama_cpp
llama = llama_cpp.Llama(sys.argv[1], n_ctx=128, n_threads=int(sys.argv[2]), verbose=False)
llama.create_completion("1, 2, 3, 4, 5, 6, 7, 8,", max_tokens=2, temperature=0)
"""


def rebuild_command(version: str) -> str:
    """The command that rebuilds llama-cpp-python ``version`` for this CPU, without the AMX instructions."""
    flags = f"-DCMAKE_C_FLAGS=\"{NO_AMX}\" -DCMAKE_CXX_FLAGS=\"{NO_AMX}\""
    return f"CMAKE_ARGS='{flags}' pip install --no-cache-dir --force-reinstall --no-deps llama-cpp-python=={version}"


def build_id(package_dir: Path, version: str) -> str:
    """What identifies the installed build: its version and the bytes of its compiled libraries (or, for a
    build without a lib folder, of its package's files)."""
    digest = hashlib.sha256(version.encode())
    folder = package_dir / "lib"
    files = sorted(folder.iterdir()) if folder.is_dir() else sorted(package_dir.glob("*.py"))
    for path in files:
        if path.is_file() and not path.is_symlink():
            digest.update(path.name.encode() + b"\0")
            digest.update(path.read_bytes())
    return digest.hexdigest()


def check_runtime(model: Path, model_id: str, build: str, version: str, verdicts: Path, threads: int) -> None:
    """Return if llama.cpp ``build`` evaluates tokens of ``model`` here (checked once, the verdict kept in
    ``verdicts``); raise a ConfigError that names the rebuild command if it dies by a crash signal. A check that
    fails otherwise (a file llama.cpp cannot load, a timeout) decides nothing: the load itself will say."""
    record = verdicts / f"{hashlib.sha256(f'{build} {model_id}'.encode()).hexdigest()[:32]}.json"
    verdict = _read(record)
    if verdict is None:
        verdict = _check(model, threads)
        if verdict is None:
            return
        _write(record, verdict)
    if verdict.get("signal"):
        raise ConfigError(crash_message(verdict["signal"], version))


def crash_message(number: int, version: str) -> str:
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = f"signal {number}"
    what = CRASHES.get(number, "a crash")
    return (f"the embedded model's runtime (llama.cpp) crashed on this CPU ({name}, {what}) in a test run: it was "
            f"compiled for instructions this machine announces but does not run (AMX, on some virtual machines); "
            f"rebuild it without them: {rebuild_command(version)}")


def _check(model: Path, threads: int) -> dict | None:
    """Run the child: {"signal": N} if a crash signal ended it, {"signal": 0} if it worked, None if undecided."""
    try:
        child = subprocess.run([sys.executable, "-c", CHILD, str(model), str(threads)], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=CHECK_SECONDS,
                               start_new_session=True)  # Ctrl-C reaches the parent, which stops the child
    except (OSError, subprocess.TimeoutExpired):
        return None
    if child.returncode == 0:
        return {"signal": 0}
    if -child.returncode in CRASHES:
        return {"signal": -child.returncode}
    return None


def _read(record: Path) -> dict | None:
    try:
        verdict = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return verdict if isinstance(verdict, dict) and isinstance(verdict.get("signal"), int) else None


def _write(record: Path, verdict: dict) -> None:
    """Keep the verdict (atomically: two first runs at once both write whole files); a cache folder that cannot be
    written only means checking again next time."""
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        temp = record.with_name(f".{record.name}.{os.getpid()}.tmp")
        temp.write_text(json.dumps(verdict), encoding="utf-8")
        os.replace(temp, record)
    except OSError:
        pass
