"""Evaluation as a library: suites of tasks with checks (suites.py, scripted_tools.py, suite.jsonl), the runs,
each task's arms interleaved (runner.py), what they add up to (reports.py) and whether the differences are
more than noise (statistics.py), the HTML report (html_report.py), and what an endpoint supports (probe.py).
`agent eval` and `agent probe` (agent/cli/) put them together."""
