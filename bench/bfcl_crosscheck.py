"""Cross-check of the BFCL suite source against BFCL's own code (a dev script, not run in CI: it imports bfcl_eval).

    python bench/bfcl_crosscheck.py [FOLDER]

FOLDER holds the bfcl_eval package (an unpacked bfcl-eval wheel, or a site-packages); default: where the
installed bfcl-eval is. BFCL's code needs a few packages the project does not: pip install filelock tenacity
tree_sitter==0.21.3 tree-sitter-java==0.21.0 tree-sitter-javascript==0.21.4 (the versions bfcl-eval pins).

For every item of the five categories it compares, item by item:
- the tools: agent/evaluation/bfcl.py's against BFCL's convert_to_tool(..., OPENAI_COMPLETIONS) on the entries of
  BFCL's load_dataset_entry (which adds the language note), and the task against the question's user message;
- the scores: calls made from the item's possible answers, as they are and corrupted (a wrong value, a
  required argument left out, an extra call, a call short, a parallel answer in reverse order, ...), scored by
  the suite's checks (`bfcl_match`, `no_call`) and by BFCL: ast_checker for the AST categories, and for
  irrelevance the rule of its relevance runner (passed when the decoded output is empty, is_empty_output);
- which calls BFCL accepts break the converted tools' JSON Schemas (the prompt protocol re-asks such a call,
  native mode marks it malformed);
- end to end: each item's first possible answer (no call in irrelevance) as a scripted model's reply, run by
  agent eval's runner in the prompt and native arms: how many runs pass.

BFCL's bfcl_eval.constants.model_config imports every model handler and their SDKs to build a table of models;
the checker reads one flag of one entry of it (underscore_to_dot, true for OpenAI-style function calling, whose
names have no dots). A stand-in module with that one entry takes its place; the checker's code is BFCL's own.
"""
from __future__ import annotations

import copy
import importlib.metadata
import json
import sys
import types
from collections import Counter
from pathlib import Path

from jsonschema import Draft202012Validator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent.config import Settings  # noqa: E402
from agent.evaluation.bfcl import CATEGORIES, load_bfcl  # noqa: E402
from agent.evaluation.runner import run_task  # noqa: E402
from agent.evaluation.suites import check_run  # noqa: E402
from agent.models import Reply, ScriptedModel  # noqa: E402
from agent.protocols import NativeProtocol, PromptProtocol  # noqa: E402

MODEL = "gpt-4o-2024-11-20-FC"  # an OpenAI model in function-calling mode: underscore_to_dot is true


def bfcl_code(folder: Path):
    sys.path.insert(0, str(folder))
    stand_in = types.ModuleType("bfcl_eval.constants.model_config")
    stand_in.MODEL_CONFIG_MAPPING = {MODEL: types.SimpleNamespace(underscore_to_dot=True)}
    sys.modules[stand_in.__name__] = stand_in
    from bfcl_eval.constants.enums import Language, ModelStyle
    from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
    from bfcl_eval.model_handler.utils import convert_to_tool
    from bfcl_eval.utils import is_empty_output, load_dataset_entry, load_ground_truth_entry

    def tools(functions):
        return convert_to_tool(functions, GORILLA_TO_OPENAPI, ModelStyle.OPENAI_COMPLETIONS)

    def score(entry, output, answer, category):
        if answer is None:  # the relevance runner: an irrelevance item passes when no call is decoded
            return is_empty_output(output)
        return ast_checker(copy.deepcopy(entry["function"]), copy.deepcopy(output), copy.deepcopy(answer),
                           Language.PYTHON, category, MODEL)["valid"]

    return load_dataset_entry, load_ground_truth_entry, tools, score


def name(function: str) -> str:
    return function.replace(".", "_")


def calls(answer: list[dict], leave_out: bool = False, last: bool = False) -> list[dict]:
    """Calls made of possible answers: each argument's first acceptable value (``last``: its last), those that
    may be left out left out (``leave_out``) or given."""
    return [{name(function): chosen(arguments, leave_out, last)} for call in answer
            for function, arguments in call.items()]


def chosen(arguments: dict, leave_out: bool, last: bool) -> dict:
    """One value of each argument's acceptable ones; an object's (BFCL lists acceptable values per key there
    too) chosen key by key, and an array of objects' object by object."""
    given = {}
    for argument, values in arguments.items():
        values = [v for v in values if v != ""]
        if values and not (leave_out and len(values) < len(arguments[argument])):
            value = copy.deepcopy(values[-1] if last else values[0])
            if isinstance(value, dict):
                value = chosen(value, leave_out, last)
            elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
                value = [chosen(v, leave_out, last) for v in value]
            given[argument] = value
    return given


def changed(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1 if isinstance(value, int) else value + 1.5
    if isinstance(value, str):
        return value + "zz"
    if isinstance(value, list):
        return value + value[:1] if value else ["zz"]
    if isinstance(value, dict):
        return {**value, "zz": 1}
    return "zz"


def restyled(value):
    """Strings as BFCL's comparison should not mind: upper case, spaces as underscores, with a full stop."""
    if isinstance(value, str):
        return value.upper().replace(" ", "_") + "."
    if isinstance(value, list):
        return [restyled(v) for v in value]
    return value


def retyped(value, kind):
    if kind is float and isinstance(value, float) and value.is_integer():
        return int(value)
    if kind is int and type(value) is int:
        return float(value)
    return value


def each(made: list[dict], change) -> list[dict]:
    """The calls with every argument's value changed by ``change``."""
    return [{f: {k: change(v) for k, v in a.items()}} for c in made for f, a in c.items()]


def variants(entry: dict, answer: list[dict] | None) -> dict[str, list[dict]]:
    """The calls to score, by variant."""
    functions = {name(f["name"]): f for f in entry["function"]}
    if answer is None:
        first = next(iter(functions))
        return {"no call": [], "a call": [{first: {}}]}
    out = {"answer": calls(answer), "optional left out": calls(answer, leave_out=True),
           "last acceptable values": calls(answer, last=True)}
    out["strings restyled"] = each(out["answer"], restyled)
    out["ints as floats"] = each(out["answer"], lambda v: retyped(v, int))
    out["whole floats as ints"] = each(out["answer"], lambda v: retyped(v, float))
    [(function, arguments)] = out["answer"][0].items()
    if arguments:
        key = next(iter(arguments))
        out["a wrong value"] = [{function: {**arguments, key: changed(arguments[key])}}] + out["answer"][1:]
    required = [r for r in functions[function]["parameters"].get("required", []) if r in arguments]
    if required:
        out["a required argument left out"] = [{function: {k: v for k, v in arguments.items() if k != required[0]}}
                                               ] + out["answer"][1:]
    out["an unexpected argument"] = [{function: {**arguments, "zz_extra": 1}}] + out["answer"][1:]
    out["an extra call"] = out["answer"] + out["answer"][:1]
    out["arrays reversed"] = each(out["answer"], lambda v: v[::-1] if isinstance(v, list) else v)
    out["numbers as strings"] = each(out["answer"], lambda v: str(v) if type(v) in (int, float) else v)
    out["an object's key dropped"] = each(out["answer"], lambda v: dict(list(v.items())[1:]) if isinstance(
        v, dict) else [dict(list(i.items())[1:]) if isinstance(i, dict) else i for i in v] if isinstance(v, list) else v)
    out["null where it may be left out"] = [{f: {**a, **{k: None for k, values in want.items() if "" in values}}}
                                            for c, w in zip(out["answer"], answer) for (f, a), want in
                                            zip(c.items(), w.values())]
    if len(out["answer"]) > 1:
        out["reverse order"] = out["answer"][::-1]
        out["a call short"] = out["answer"][:-1]
    others = [f for f in functions if f != function]
    if others:
        out["another function"] = [{others[0]: arguments}] + out["answer"][1:]
    return out


def replies(made: list[dict]) -> dict[str, Reply]:
    """The calls as each arm's model would send them: a prompt-protocol action (or batch), or native tool calls;
    no call is a final answer in text."""
    pairs = [(f, a) for c in made for f, a in c.items()]
    if not pairs:
        return {"prompt": Reply(content=json.dumps({"type": "final", "answer": "No function fits."})),
                "native": Reply(content="No function fits.")}
    actions = [{"type": "tool_call", "tool": f, "arguments": a} for f, a in pairs]
    return {"prompt": Reply(content=json.dumps(actions if len(actions) > 1 else actions[0])),
            "native": Reply(tool_calls=[{"id": f"call_{i}", "type": "function",
                                         "function": {"name": f, "arguments": json.dumps(a)}}
                                        for i, (f, a) in enumerate(pairs)], finish_reason="tool_calls")}


def main(argv: list[str]) -> int:
    if argv:
        folder = Path(argv[0])
    else:
        try:
            folder = Path(importlib.metadata.distribution("bfcl-eval").locate_file(""))
        except importlib.metadata.PackageNotFoundError:
            print("bfcl-eval is not installed: pip install --no-deps bfcl-eval, or pass the folder of an unpacked "
                  "wheel", file=sys.stderr)
            return 2
    load_entries, load_answers, bfcl_tools, bfcl_score = bfcl_code(folder)
    counts, tool_counts, disagreements, outside, runs = Counter(), Counter(), [], [], Counter()
    arms = {"prompt": PromptProtocol, "native": NativeProtocol}
    for category in CATEGORIES:
        tasks = {t.id: t for t in load_bfcl(category, str(folder)).tasks}
        answers = {a["id"]: a["ground_truth"] for a in load_answers(category)} if category != "irrelevance" else {}
        for entry in load_entries(category):
            task, answer = tasks[entry["id"]], answers.get(entry["id"])
            tool_counts[category, "tools"] += task.tools == bfcl_tools(entry["function"])
            tool_counts[category, "task"] += task.task == entry["question"][0][-1]["content"]
            tool_counts[category, "items"] += 1
            schemas = {t["function"]["name"]: t["function"]["parameters"] for t in task.tools}
            for variant, made in variants(entry, answer).items():
                theirs = bfcl_score(entry, made, answer, category)
                faults = [(f, e.message[:100]) for c in made for f, a in c.items() if f in schemas
                          for e in Draft202012Validator(schemas[f]).iter_errors(a)]
                if theirs and faults:
                    outside.append((entry["id"], variant, *faults[0]))
                ours = all(c["ok"] for c in check_run(task.checks, "", [
                    {"tool": f, "arguments": a} for c in made for f, a in c.items()], Path(".")))
                counts[category, variant, "runs"] += 1
                counts[category, variant, "bfcl"] += theirs
                counts[category, variant, "ours"] += ours
                counts[category, variant, "agree"] += theirs == ours
                if theirs != ours:
                    disagreements.append((entry["id"], variant, theirs, ours, made))
            for arm, reply in replies(calls(answer) if answer is not None else []).items():
                record = run_task(task, arms[arm], ScriptedModel([reply] * 4), Settings(), arm)
                runs[category, arm, "runs"] += 1
                runs[category, arm, "passed"] += record["passed"]
                runs[category, arm, "model calls"] += record["model_calls"]
    print("tools and tasks, converted here and by BFCL's own code (equal / items):")
    for category in CATEGORIES:
        items = tool_counts[category, "items"]
        print(f"  {category:<18} tools {tool_counts[category, 'tools']}/{items}  tasks {tool_counts[category, 'task']}/{items}")
    print()
    print(f"{'category':<18} {'calls scored':<29} {'runs':>5} {'BFCL passes':>11} {'ours passes':>11} {'agree':>6}")
    for category in CATEGORIES:
        for variant in dict.fromkeys(v for c, v, _ in counts if c == category):
            row = [counts[category, variant, k] for k in ("runs", "bfcl", "ours", "agree")]
            print(f"{category:<18} {variant:<29} {row[0]:>5} {row[1]:>11} {row[2]:>11} {row[3]:>6}")
    total = sum(n for (_, _, k), n in counts.items() if k == "runs")
    agree = sum(n for (_, _, k), n in counts.items() if k == "agree")
    print(f"\nagreement: {agree} of {total} scorings ({100 * agree / total:.2f}%)")
    for item, variant, theirs, ours, made in disagreements[:20]:
        print(f"  differs: {item} {variant}: BFCL {theirs}, ours {ours}: {json.dumps(made)[:200]}")
    print("\naccepted by BFCL, outside the converted tools' JSON Schemas (re-asked by the prompt protocol, a "
          "malformed call in native mode), by calls scored:")
    for variant, n in Counter(variant for _, variant, _, _ in outside).items():
        print(f"  {variant:<29} {n}")
    for item, variant, function, error in outside:
        if variant == "answer":
            print(f"  {variant}: {item} {function}: {error}")
    print("\nend to end, the first possible answer as the model's reply (passed / runs, model calls):")
    for category in CATEGORIES:
        cells = [f"{arm} {runs[category, arm, 'passed']}/{runs[category, arm, 'runs']} "
                 f"({runs[category, arm, 'model calls']} calls)" for arm in arms]
        print(f"  {category:<18} {'   '.join(cells)}")
    return 0 if agree == total else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
