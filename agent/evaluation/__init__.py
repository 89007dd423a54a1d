"""Evaluation as a library: suites of tasks with checks (suites.py, scripted_tools.py, suite.jsonl), the runs
(runner.py) and what they add up to (reports.py). `agent eval` (agent/cli/eval.py) puts them together."""
