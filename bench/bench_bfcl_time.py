"""Where a BFCL task's time goes on the embedded model, arm by arm: the prompt's tokens (how many llama.cpp had to
evaluate, the rest reused from what it held), the tokens generated, llama.cpp's own time for each, and what is
left, the agent's share (the grammar, the chat template, parsing, switching between the arms' kept states). The
arms run interleaved on the same items, as `agent eval` runs them. Needs the `local` extra and bfcl-eval's data.

    python bench/bench_bfcl_time.py [CATEGORIES] [--sample N] [--seed S]

CATEGORIES defaults to the five of docs/bfcl.md; --sample 8 --seed 2 by default (seed 1 is what the README
reports: screen on another).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.config import Settings  # noqa: E402
from agent.evaluation.bfcl import CATEGORIES, load_bfcl  # noqa: E402
from agent.evaluation.runner import run_eval  # noqa: E402
from agent.models.local import load_local_model  # noqa: E402
from agent.protocols import NativeProtocol, PromptProtocol  # noqa: E402


class Timed:
    """The local model, each call's wall time beside llama.cpp's own counters for it."""

    def __init__(self, model):
        import llama_cpp

        self.model, self.lib, self.calls = model, llama_cpp, []

    def complete(self, messages, **options):
        ctx = self.model.llama.ctx  # the runs take turns (one worker), so the counters are this call's
        self.lib.llama_perf_context_reset(ctx)
        started = time.perf_counter()
        reply = self.model.complete(messages, **options)
        wall = time.perf_counter() - started
        perf = self.lib.llama_perf_context(ctx)
        arm = "native" if options.get("tools") else "prompt-constrained" if options.get("response_format") else "prompt"
        self.calls.append({"arm": arm, "wall": wall, "prompt": (reply.usage or {}).get("prompt_tokens", 0),
                           "evaluated": perf.n_p_eval, "prompt_s": perf.t_p_eval_ms / 1000,
                           "generated": perf.n_eval, "generation_s": perf.t_eval_ms / 1000})
        return reply


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("categories", nargs="?", default=",".join(CATEGORIES))
    parser.add_argument("--sample", type=int, default=8)
    parser.add_argument("--seed", type=int, default=2)
    args = parser.parse_args()
    tasks = load_bfcl(args.categories, sample=args.sample, seed=args.seed).tasks
    model = load_local_model()
    timed = Timed(model)
    arms = {"prompt-constrained": lambda registry: PromptProtocol(registry, constrain=True),
            "native": lambda registry: NativeProtocol(registry)}
    runs = run_eval(tasks, arms, timed, Settings()).runs
    print(f"{len(tasks)} BFCL items ({args.categories}, {args.sample} per category, seed {args.seed}), "
          "embedded coder-1.5b, temperature 0; per task, mean")
    per_task = {arm: defaultdict(float) for arm in arms}
    for call in timed.calls:
        totals = per_task[call["arm"]]
        for key in ("wall", "prompt", "evaluated", "prompt_s", "generated", "generation_s"):
            totals[key] += call[key]
        totals["calls"] += 1
    rows = [("model calls", "calls", "{:.2f}"), ("prompt tokens", "prompt", "{:.0f}"),
            ("  evaluated (not reused)", "evaluated", "{:.0f}"), ("  llama.cpp's time for them, s", "prompt_s", "{:.2f}"),
            ("tokens generated", "generated", "{:.0f}"), ("  llama.cpp's time for them, s", "generation_s", "{:.2f}")]
    print(f"{'':34}" + "".join(f"{arm:>20}" for arm in arms))
    for label, key, form in rows:
        print(f"{label:34}" + "".join(f"{form.format(per_task[arm][key] / len(tasks)):>20}" for arm in arms))
    rest = {arm: (t["wall"] - t["prompt_s"] - t["generation_s"]) / len(tasks) for arm, t in per_task.items()}
    print(f"{'the rest: the agent and its grammar, s':34}" + "".join(f"{rest[arm]:>20.2f}" for arm in arms))
    print(f"{'model time per task, s':34}" + "".join(f"{per_task[arm]['wall'] / len(tasks):>20.2f}" for arm in arms))
    seconds = {arm: statistics.mean(r["seconds"] for r in runs if r["protocol"] == arm) for arm in arms}
    passed = {arm: sum(r["passed"] for r in runs if r["protocol"] == arm) for arm in arms}
    print(f"{'a run, wall s (agent eval seconds)':34}" + "".join(f"{seconds[arm]:>20.2f}" for arm in arms))
    print(f"{'passed':34}" + "".join(f"{passed[arm]:>20}" for arm in arms))


if __name__ == "__main__":
    main()
