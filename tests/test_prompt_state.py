"""The embedded model's state after a process's first prompt, kept in the cache for the next process: used only
with the model, build, context and prompt start it was made for, never when damaged or cut short, and whole
when runs write it at once. The file layer is tested on its own; the rest with the real model where installed."""
import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest
from agent.tools import builtin_registry

from agent.config import ConfigError
from agent.models.local_files import DEFAULT, cache_dir, locate_parts
from agent.models.prompt_state import MAGIC, PromptStates, RecentStates, read_state, write_state
from agent.protocols import NativeProtocol, PromptProtocol
from tests.support import child_env

README_TASK = "Compute 128*96 + 45**2 - 88/2"


def test_a_state_file_reads_back_whole(tmp_path):
    path = tmp_path / "s.state"
    assert write_state(path, {"tokens": [1, 2, 3]}, b"state bytes")
    header, state = read_state(path)
    assert (header["tokens"], bytes(state), header["bytes"]) == ([1, 2, 3], b"state bytes", 11)


@pytest.mark.parametrize("damage", ["truncated", "flipped", "longer", "no magic", "header", "huge", "empty"])
def test_a_damaged_or_truncated_state_file_is_not_used(tmp_path, damage):
    path = tmp_path / "s.state"
    write_state(path, {"tokens": [1]}, b"x" * 1000)
    data = path.read_bytes()
    damaged = {"truncated": data[:-10], "flipped": data[:-1] + b"y", "longer": data + b"x",
               "no magic": data[len(MAGIC):], "header": MAGIC + b"{not json\n" + b"x" * 1000,
               "huge": MAGIC + json.dumps({"bytes": 1 << 40, "sha256": "0"}).encode() + b"\n", "empty": b""}[damage]
    path.write_bytes(damaged)
    assert read_state(path) is None


def _writer(path: str, mark: int, rounds: int) -> None:
    for _ in range(rounds):
        write_state(Path(path), {"tokens": [mark]}, bytes([mark]) * 2_000_000)


def test_runs_writing_the_same_state_at_once_leave_whole_files_for_every_reader(tmp_path):
    path = tmp_path / "s.state"
    writers = [multiprocessing.Process(target=_writer, args=(str(path), mark, 15)) for mark in (1, 2, 3)]
    for writer in writers:
        writer.start()
    seen = set()
    while any(w.is_alive() for w in writers):
        found = read_state(path)
        if found:
            header, state = found
            assert bytes(state) == bytes(header["tokens"]) * 2_000_000  # never a mix of two writers
            seen.add(header["tokens"][0])
    for writer in writers:
        writer.join()
        assert writer.exitcode == 0
    assert read_state(path) is not None and seen
    assert [p.name for p in tmp_path.iterdir()] == ["s.state"]  # no temporary file left


@pytest.fixture(scope="module")
def model():
    pytest.importorskip("llama_cpp")
    try:
        locate_parts(DEFAULT)
    except ConfigError as error:
        pytest.skip(f"the default local model is not installed: {error}")
    from agent.models.local import load_local_model

    return load_local_model(cache=cache_dir(os.environ))


def fresh(model, folder: Path, identity: dict | None = None):
    """``model`` with its context emptied, as in a new process, keeping states in ``folder``."""
    import llama_cpp

    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(model.llama.ctx), True)
    model.llama.n_tokens = 0
    model.states = PromptStates(folder, identity or {"model": DEFAULT.sha256, "test": True})
    model.recent = None  # no state in memory either
    return model


def messages(system: str, task: str = README_TASK) -> list[dict]:
    return [{"role": "system", "content": system}, {"role": "user", "content": task}]


def start(history: list[dict]) -> str:
    """How LocalModel names a prompt's start: its first message and the tools (none here)."""
    return json.dumps([history[:1], None], sort_keys=True)


@pytest.fixture(scope="module")
def system():
    return PromptProtocol(builtin_registry("."), constrain=True)


def test_a_fresh_context_starts_from_the_kept_state_and_answers_the_same(model, system, tmp_path):
    history = messages(system.system_prompt())
    cold = fresh(model, tmp_path).complete(history, **system.options)
    [kept] = tmp_path.glob("*.state")
    header, _ = read_state(kept)
    assert len(header["tokens"]) >= cold.usage["prompt_tokens"]
    warm = fresh(model, tmp_path)
    assert warm.states.restore(warm.llama, start(history))
    assert warm.llama.n_tokens == len(header["tokens"])
    assert fresh(model, tmp_path).complete(history, **system.options).content == cold.content
    other = fresh(model, tmp_path).complete(messages(system.system_prompt(), "What is 2**20 - 1?"), **system.options)
    compact = other.content.replace(" ", "")
    assert "2**20" in compact or "1048575" in compact  # the task's own tokens were read, not the kept ones
    assert len(list(tmp_path.glob("*.state"))) == 1  # the same start: the state was used, not kept again


def test_a_changed_prompt_start_is_not_given_the_state_of_another(model, system, tmp_path):
    fresh(model, tmp_path).complete(messages(system.system_prompt()), max_tokens=8, **system.options)
    changed = messages(system.system_prompt() + "\nInstructions from the user:\nbe brief\n")
    warm = fresh(model, tmp_path)
    assert not warm.states.restore(warm.llama, start(changed))
    warm.complete(changed, max_tokens=8, **system.options)
    assert len(list(tmp_path.glob("*.state"))) == 2


def test_a_state_of_another_model_or_build_is_not_used_even_under_its_name(model, system, tmp_path):
    history = messages(system.system_prompt())
    fresh(model, tmp_path, {"model": "a", "runtime": "1"}).complete(history, max_tokens=8, **system.options)
    [kept] = tmp_path.glob("*.state")
    for identity in ({"model": "b", "runtime": "1"}, {"model": "a", "runtime": "2"}):
        other = fresh(model, tmp_path, identity)
        os.replace(kept, other.states.path(start(history)))  # as if it had been written for this one
        assert not other.states.restore(other.llama, start(history))
        kept = other.states.path(start(history))


@pytest.mark.parametrize("damage", [lambda data: data[: len(data) // 2],
                                    lambda data: data[:-1] + bytes([data[-1] ^ 1])], ids=["truncated", "flipped"])
def test_a_damaged_or_truncated_state_is_not_loaded_and_is_rebuilt(model, system, tmp_path, damage):
    history = messages(system.system_prompt())
    expected = fresh(model, tmp_path).complete(history, max_tokens=30, **system.options).content
    [kept] = tmp_path.glob("*.state")
    kept.write_bytes(damage(kept.read_bytes()))
    warm = fresh(model, tmp_path)
    assert not warm.states.restore(warm.llama, start(history))
    assert warm.llama.n_tokens == 0
    assert warm.complete(history, max_tokens=30, **system.options).content == expected
    assert read_state(kept) is not None  # kept again, whole


def test_two_runs_of_the_readme_command_at_once_share_one_whole_state(model, tmp_path):
    """Two `agent` processes with an empty state folder both answer; the state they leave is whole, and the
    next run starts from it (reads it, touches it, does not write it again). With the calculator alone: a
    shorter prompt, the same way through the cache."""
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / DEFAULT.name).symlink_to(cache_dir(os.environ) / DEFAULT.name)
    env = child_env(AGENT_CACHE_DIR=str(cache))
    command = [sys.executable, "-m", "agent", "--local", "--no-log", "--tools", "calculator", README_TASK]
    cores = sorted(os.sched_getaffinity(0))
    runs = [subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, preexec_fn=lambda core=core: os.sched_setaffinity(0, {core}))
            for core in (cores[0], cores[-1])]  # a core each, so that neither waits on the other's threads
    for run in runs:
        out, err = run.communicate(timeout=600)
        assert run.returncode == 0, err
        assert "14269" in out
    [kept] = (cache / "states").glob("*.state")
    assert read_state(kept) is not None
    before = kept.stat()
    os.utime(kept, (before.st_atime - 100, before.st_mtime - 100))
    third = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert third.returncode == 0 and "14269" in third.stdout, third.stderr
    after = kept.stat()
    assert after.st_ino == before.st_ino and after.st_mtime > before.st_mtime - 100  # used, not rewritten


def test_prompts_taking_turns_each_find_their_state_again_in_memory(model, system, tmp_path):
    """Two system prompts alternating (the arms of an evaluation): the third call starts from the state the
    first one left, kept in memory while the second ran, and answers as a cold call does."""
    other = NativeProtocol(builtin_registry("."))
    first, second = messages(system.system_prompt()), messages(other.system_prompt(), "What is 2+2?")
    cold = fresh(model, tmp_path).complete(first, max_tokens=30, **system.options).content
    fresh(model, tmp_path)
    model.states, model.recent = None, RecentStates()
    assert model.complete(first, max_tokens=30, **system.options).content == cold
    held = list(model.llama.input_ids[:model.llama.n_tokens])
    model.complete(second, max_tokens=30, **other.options)
    assert [entry[1] for entry in model.recent.entries] == [held]  # kept when the second prompt came
    assert model.recent.before(model.llama, start(first))  # it shares far more of the first prompt's start
    assert list(model.llama.input_ids[:model.llama.n_tokens]) == held
    assert model.complete(first, max_tokens=30, **system.options).content == cold
    assert not model.recent.before(model.llama, start(first))  # the context holds it already
    assert len(model.recent.entries) == 2  # the second prompt's state was kept when the first came back
