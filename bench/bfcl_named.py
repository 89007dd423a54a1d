"""Which optional parameters the embedded model's closing lever counts as named (agent.models.local_named), read
against BFCL's possible answers, with no model: for every item of BFCL's calling categories and every optional
parameter of a function its answer calls, whether the rule names it, and whether the answer needs a value
(no "" among its values), takes a value or none, or wants the parameter left out.

    python bench/bfcl_named.py [--bfcl-data PATH]

Prints, for the parameter's name and allowed values (the rule before 2026-12-06) and for the values its
description quotes (added then), how many parameters each names only and how the answers take them.
"""
from __future__ import annotations

import argparse
import json
from collections import Counter

from agent.evaluation.bfcl import DataFiles
from agent.models import local_named

CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bfcl-data", help="a bfcl-eval wheel or folder; default: the installed package")
    files = DataFiles.find(parser.parse_args().bfcl_data)
    counts: Counter = Counter()
    for category in CATEGORIES:
        questions = [json.loads(line) for line in files.lines(files.newest(category) or "") if line.strip()]
        answers = {a["id"]: a["ground_truth"] for a in (json.loads(line) for line in
                   files.lines(files.newest(category, answers=True) or "") if line.strip())}
        for item in questions:
            said = " ".join(m["content"] for turn in item["question"] for m in turn if m["role"] == "user").lower()
            words = set(local_named.WORD.findall(said))
            for function in item["function"]:
                calls = [call[function["name"]] for call in answers[item["id"]] if function["name"] in call]
                parameters = function["parameters"]
                for name, spec in parameters.get("properties", {}).items():
                    if calls and name not in parameters.get("required", []):
                        counts[_rule(name, spec, words), _taken([c.get(name, [""]) for c in calls])] += 1
    for rule in ("name or allowed value", "quoted value only", "neither"):
        row = {taken: counts[rule, taken] for taken in ("needed", "either", "left out")}
        print(f"{rule:24} " + ", ".join(f"{taken} {n}" for taken, n in row.items()) + f"; {sum(row.values())} in all")


def _rule(name: str, spec: dict, words: set[str]) -> str:
    undescribed = {key: value for key, value in spec.items() if key != "description"}  # no values quoted
    if local_named._is_named(name, undescribed, words):
        return "name or allowed value"
    return "quoted value only" if local_named._is_named(name, spec, words) else "neither"


def _taken(values: list[list]) -> str:
    """"needed": every call's answer has a value for it; "left out": in some call only its absence is right;
    "either": a value or none."""
    if all("" not in v for v in values):
        return "needed"
    return "left out" if any(v == [""] for v in values) else "either"


if __name__ == "__main__":
    main()
