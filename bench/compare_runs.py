"""Compare `agent eval --out` files paired on their tasks: before and after a prompt change, or runs of one
suite made in parts (one category a command), joined.

    python bench/compare_runs.py BEFORE.json [MORE.json ...] -- AFTER.json [MORE.json ...]
    python bench/compare_runs.py --arm prompt-constrained before.json -- after.json

Each side is the runs of its files put together (a task run in two files of one side is an error). Every arm
both sides ran is compared with itself (``before:ARM`` against ``after:ARM``), with `agent eval`'s own table
and paired statistics (McNemar's exact p, the bootstrap interval), overall and per category, on the tasks
both sides ran; the tasks one side lacks are counted and left out. Without ``--`` the files are one side:
their arms are compared with each other, as `agent eval` compares them in one run.
"""
from __future__ import annotations

import argparse
import json
import sys

from agent.evaluation.reports import comparison_rows, comparisons, render_table, summarize, table_rows


def load(paths: list[str], prefix: str) -> list[dict]:
    """The runs of ``paths``, each labelled ``prefix`` + its arm."""
    runs, seen = [], set()
    for path in paths:
        with open(path, encoding="utf-8") as file:
            for run in json.load(file)["runs"]:
                key = (run["protocol"], run["task"], run.get("repeat", 0))
                if key in seen:
                    sys.exit(f"compare_runs: {run['task']} ({run['protocol']}) is in two files of one side")
                seen.add(key)
                runs.append({**run, "protocol": prefix + run["protocol"]})
    return runs


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arm", action="append", help="compare only these arms (default: every arm both sides ran)")
    parser.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    parser.add_argument("files", nargs="+", help="BEFORE.json ... [-- AFTER.json ...]")
    args = parser.parse_args([a if a != "--" else "::" for a in argv])
    if "::" in args.files:
        at = args.files.index("::")
        runs = load(args.files[:at], "before:") + load(args.files[at + 1:], "after:")
    else:
        runs = load(args.files, "")
    if args.arm:
        runs = [r for r in runs if r["protocol"].split(":")[-1] in args.arm]
    labels = list(dict.fromkeys(r["protocol"] for r in runs))
    if "::" in args.files:  # only the tasks both sides ran, so that each side's rates are on the same items
        sides = [{(r["task"], r.get("repeat", 0)) for r in runs if r["protocol"].startswith(s)} for s in ("before:", "after:")]
        both = sides[0] & sides[1]
        left = len(sides[0] ^ sides[1])
        if left:
            print(f"compare_runs: {left} task(s) ran on one side only, left out", file=sys.stderr)
        runs = [r for r in runs if (r["task"], r.get("repeat", 0)) in both]
        labels = sorted(labels, key=lambda label: (label.split(":", 1)[1], label.split(":", 1)[0] != "before"))
    print(render_table(table_rows(summarize(runs, labels)), args.markdown))
    pairs = comparisons(runs, labels)
    if "::" in args.files:
        pairs = [p for p in pairs if p["a"].split(":", 1)[1] == p["b"].split(":", 1)[1]]
    if pairs:
        print()
        print(render_table(comparison_rows(pairs), args.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
