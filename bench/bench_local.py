"""Prints what a built-in local model costs on this machine: the README command's wall time (the first run after
install, a run with no state kept as every run was before the warm start, and a second run), and for each step
(the first, cold and warm, and a later one) the agent's time beside llama.cpp's own for the same tokens, without
and with the grammar. Needs the model's extra (`local` for coder-1.5b, `local-small` for small).

    python bench/bench_local.py [coder-1.5b|small] [--peer PYTHON]

--peer names the Python of another install of the project (an earlier commit, say), whose README command runs
twice beside these, in the same cache folder, alternating with this one's runs.
"""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agent import Agent
from agent.models.local import load_local_model
from agent.models.local_files import (
    BUILT_IN,
    DEFAULT,
    cache_dir,
    embedded_model,
    verify,
)
from agent.models.local_grammar import CheckedGreedy, gbnf
from agent.models.prompt_state import PromptStates
from agent.protocols import NativeProtocol, PromptProtocol

TASK = "Compute 128*96 + 45**2 - 88/2"
OTHER_TASK = "What is 2**20 - 1?"


def default_tools(workspace: str):
    """The tools `agent TASK` offers by default, as the command line makes them (nothing is approved)."""
    from agent.cli.toolbox import toolbox
    from agent.cli.run import run_parser

    return toolbox(run_parser().parse_args(["--workspace", workspace, TASK]), None).registry


def timed(label: str, function):
    started = time.perf_counter()
    value = function()
    print(f"{label:<58} {time.perf_counter() - started:7.2f} s")
    return value


def readme_command(choice: str, cache: Path, folder: Path, python: str = sys.executable) -> tuple[float, list[float]]:
    """One run of the README command with the cache folder ``cache`` (by the install of ``python``): its wall time
    and each model call's."""
    trace = folder / f"trace-{time.monotonic_ns()}.jsonl"
    env = {**os.environ, "AGENT_CACHE_DIR": str(cache)}
    started = time.perf_counter()
    done = subprocess.run([python, "-m", "agent", "--local", "--local-model", choice, "--no-log",
                           "--trace", str(trace), TASK], env=env, cwd=folder, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"the README command failed ({done.returncode}): {done.stderr.strip()}")
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    return wall, [e["seconds"] for e in events if e["event"] == "model_call"]


def wall_times(choice: str, cache: Path, peer: str | None) -> None:
    """The README command in a fresh cache folder (the model assembled into it, the runtime checked), then with
    its kept states deleted, then again; with a ``peer``, its runs between these."""
    with tempfile.TemporaryDirectory(dir=cache.parent, prefix="bench-cache-") as fresh, \
            tempfile.TemporaryDirectory(prefix="bench-work-") as work:
        fresh, work = Path(fresh), Path(work)
        runs = [("first run after install (assembles, checks the runtime)", readme_command(choice, fresh, work))]
        if peer:
            runs.append(("peer: a run", readme_command(choice, fresh, work, peer)))
        shutil.rmtree(fresh / "states")
        runs.append(("a run with no state kept (every run before warm starts)", readme_command(choice, fresh, work)))
        if peer:
            runs.append(("peer: another run", readme_command(choice, fresh, work, peer)))
        runs.append(("the second run (warm start)", readme_command(choice, fresh, work)))
    print("\nThe README command, agent --local ... (wall time; each model call)")
    for label, (wall, calls) in runs:
        print(f"  {label:<56} {wall:6.2f} s   steps: {', '.join(f'{s:.2f}' for s in calls)} s")


class Recorder:
    """The local model, noting for each call the tokens the context held before it and after it."""

    def __init__(self, model):
        self.model, self.calls = model, []

    def complete(self, messages, **options):
        llama = self.model.llama
        before = list(llama.input_ids[:llama.n_tokens])
        started = time.perf_counter()
        reply = self.model.complete(messages, **options)
        self.calls.append({"before": before, "after": list(llama.input_ids[:llama.n_tokens]),
                           "prompt": reply.usage["prompt_tokens"], "seconds": time.perf_counter() - started})
        return reply


def replay(llama, call: dict, grammar: str | None = None, checked: bool = False) -> tuple[float, int, int]:
    """llama.cpp alone on a call's tokens: from the prefix the call reused, evaluate the rest of its prompt, then
    each token it generated, choosing each greedily: free, with llama.cpp's grammar sampler filtering every
    candidate, or (``checked``) with the grammar consulted on the likeliest token first. Seconds, tokens
    evaluated, tokens generated."""
    import llama_cpp
    import numpy as np
    from llama_cpp._internals import LlamaSampler
    from llama_cpp.llama_grammar import LlamaGrammar

    prompt, after = call["after"][:call["prompt"]], call["after"]
    reused = 0
    for a, b in zip(call["before"], prompt):
        if a != b:
            break
        reused += 1
    reused = min(reused, len(prompt) - 1)  # llama-cpp-python evaluates at least one prompt token again
    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(llama.ctx), True)
    llama.n_tokens = 0
    llama.eval(prompt[:reused])
    started = time.perf_counter()
    sampler, check = LlamaSampler(), CheckedGreedy(llama, grammar) if checked else None
    if grammar and not checked:
        sampler.add_grammar(llama._model, LlamaGrammar.from_string(grammar))
    sampler.add_greedy()
    llama.eval(prompt[reused:])
    generated = after[len(prompt):]
    for token in [*generated, None]:  # None: the token that ended the reply, chosen but never evaluated
        if check:
            logits = np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(llama.n_vocab(),))
            check(llama.input_ids[:llama.n_tokens], logits.copy()).argmax()
        else:
            sampler.sample(llama._ctx, -1)
        if token is not None:
            llama.eval([token])
    return time.perf_counter() - started, len(prompt) - reused, len(generated) + 1


def steps(model, cache_root: Path) -> None:
    """The README task run in-process twice (a fresh context, then one restored from the kept state), each model
    call replayed in llama.cpp alone without and with the grammar."""
    llama = model.llama
    with tempfile.TemporaryDirectory() as work, tempfile.TemporaryDirectory(dir=cache_root) as states:
        identity = dict(model.states.identity) if model.states else {"model": "bench"}
        model.states, model.recent = PromptStates(Path(states), identity), None  # cold means cold
        recorder = Recorder(model)
        protocol = PromptProtocol(default_tools(work), constrain=True)
        grammar = gbnf(json.dumps(protocol.options["response_format"]["json_schema"]["schema"]))
        firsts = []  # each run's first call
        for task in (TASK, TASK, OTHER_TASK):
            import llama_cpp

            firsts.append(len(recorder.calls))
            llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(llama.ctx), True)
            llama.n_tokens = 0
            result = Agent(recorder, protocol.registry, protocol).run(task)
            assert result.status == "final", result
        cold, warm, other = (recorder.calls[i] for i in firsts)
        later = recorder.calls[1]
        warm["before"] = other["before"] = cold["after"]  # what the state kept after the cold call holds
        rows = [("first step, cold", cold), ("first step, warm (state kept)", warm),
                ("first step, warm, another task", other), ("later step", later)]
        print("\nEach step: the agent (llama-cpp-python's chat completion, parsing, checking) beside llama.cpp alone")
        print("on the same tokens, greedy; the difference is what the agent and its Python layer add")
        print(f"  {'step':<32} {'evaluated + generated':>22} {'agent':>8} {'free':>7} {'grammar, every':>15} "
              f"{'checked':>8} {'agent adds':>11}")
        for label, call in rows:
            free, evaluated, generated = replay(llama, call)
            every, _, _ = replay(llama, call, grammar)
            checked, _, _ = replay(llama, call, grammar, checked=True)
            print(f"  {label:<32} {f'{evaluated} + {generated} tokens':>22} {call['seconds']:7.2f}s {free:6.2f}s "
                  f"{every:14.2f}s {checked:7.2f}s {call['seconds'] - checked:10.2f}s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", choices=BUILT_IN, default=DEFAULT.choice)
    parser.add_argument("--no-wall", action="store_true", help="skip the runs of the README command")
    parser.add_argument("--peer", metavar="PYTHON", help="another install's Python, whose README command runs beside")
    args = parser.parse_args()
    embedded = BUILT_IN[args.model]
    print(f"{embedded.choice}: {embedded.title}")
    cache = cache_dir(os.environ)
    path = timed("find (or assemble) the GGUF file and verify it", lambda: embedded_model(embedded, cache))
    timed(f"verify its SHA-256 ({embedded.size / 1e6:.0f} MB)", lambda: verify(path, embedded.size, embedded.sha256))
    if not args.no_wall:
        wall_times(embedded.choice, cache, args.peer)
    print()
    model = timed("load the model (verifies the SHA-256 once more)",
                  lambda: load_local_model(local_model=embedded.choice, cache=cache))
    steps(model, cache)
    work = tempfile.mkdtemp()
    prompt, native = PromptProtocol(default_tools(work), constrain=True), NativeProtocol(default_tools(work))
    task = {"role": "user", "content": TASK}
    sizes = [model.complete([{"role": "system", "content": p.system_prompt()}, task], **p.options)
             .usage["prompt_tokens"] for p in (prompt, native)]
    print(f"\n{'first request, the default tools: prompt mode, native':<58} {sizes[0]}, {sizes[1]} tokens")
    print(f"{'peak resident memory':<58} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:7.0f} MB")


if __name__ == "__main__":
    main()
