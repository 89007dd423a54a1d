"""Prints what a built-in local model costs on this machine: verifying, loading, and a step with and without the
prompt cache and the schema constraint. Needs the model's extra (`local` for coder-1.5b, `local-small` for small).

    python bench/bench_local.py [coder-1.5b|small]
"""
import argparse
import os
import resource
import time

from agent.models.local import load_local_model
from agent.models.local_files import BUILT_IN, DEFAULT, cache_dir, embedded_model, verify
from agent.protocols import NativeProtocol, PromptProtocol
from agent.tools import builtin_registry


def timed(label: str, function):
    started = time.perf_counter()
    value = function()
    print(f"{label:<52} {time.perf_counter() - started:7.2f} s")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", choices=BUILT_IN, default=DEFAULT.choice)
    embedded = BUILT_IN[parser.parse_args().model]
    print(f"{embedded.choice}: {embedded.title}")
    cache = cache_dir(os.environ)
    path = timed("find (or assemble) the GGUF file and verify it", lambda: embedded_model(embedded, cache))
    timed(f"verify its SHA-256 ({embedded.size / 1e6:.0f} MB)", lambda: verify(path, embedded.size, embedded.sha256))
    model = timed("load the model (verifies the SHA-256 once more)",
                  lambda: load_local_model(local_model=embedded.choice, cache=cache))
    protocol = PromptProtocol(builtin_registry("."), constrain=True)
    system = {"role": "system", "content": protocol.system_prompt()}
    task = {"role": "user", "content": "Compute 128*96 + 45**2 - 88/2"}
    first = timed("first step, cold prompt, constrained", lambda: model.complete([system, task], **protocol.options))
    follow = [system, task, {"role": "assistant", "content": first.content},
              {"role": "user", "content": "Result of calculator:\n14269.0"}]
    second = timed("second step, prompt prefix cached, constrained",
                   lambda: model.complete(follow, **protocol.options))
    timed("the same second step again, unconstrained", lambda: model.complete(follow))
    print(f"{'tokens: first step prompt + completion':<52} {first.usage['prompt_tokens']} + "
          f"{first.usage['completion_tokens']}; second {second.usage['prompt_tokens']} + "
          f"{second.usage['completion_tokens']}")
    native = NativeProtocol(builtin_registry("."))
    native_first = model.complete([{"role": "system", "content": native.system_prompt()}, task], **native.options)
    print(f"{'first request, built-in tools: prompt mode, native':<52} {first.usage['prompt_tokens']}, "
          f"{native_first.usage['prompt_tokens']} tokens (the model's own count)")
    print(f"{'peak resident memory':<52} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:7.0f} MB")


if __name__ == "__main__":
    main()
