"""`agent eval` with arms: three in one run, interleaved; the paired comparison; the HTML report; the progress
bar on a terminal; many workers against one server."""
import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agent.cli import main
from agent.evaluation.runner import schedule
from agent.evaluation.suites import Task
from tests.support import child_env

ARMS = ["--arm", "prompt", "--arm", "prompt-constrained", "--arm", "native"]


def final(answer: str) -> str:
    return json.dumps({"type": "final", "answer": answer})


def suite_file(tmp_path: Path, count: int, category=None) -> str:
    lines = [{"id": f"t{i}", "task": f"Question {i}: what is 2+2?", "checks": {"answer_number": 4},
              **({"category": category(i)} if category else {})} for i in range(count)]
    path = tmp_path / "suite.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


def arm_of(body: dict) -> str:
    return "native" if "tools" in body else "prompt-constrained" if "response_format" in body else "prompt"


def answer_by_arm(server, prompt: str, constrained: str, native: str) -> None:
    server.answer_when(lambda body: "response_format" in body, constrained)
    server.answer_when(lambda body: "tools" in body, native)
    server.answer_when(lambda body: True, prompt)


def endpoint(server, workers=1) -> list[str]:
    return ["--base-url", server.url, "--model", "m", "--workers", str(workers)]


def test_each_task_starts_with_the_next_arm_in_turn():
    tasks = [Task(f"t{i}", "x", {"answer_number": 1}) for i in range(6)]
    order = [(i, label) for i, _, label, _ in schedule(tasks, ["a", "b", "c"])]
    assert order[:6] == [(0, "a"), (0, "b"), (0, "c"), (1, "b"), (1, "c"), (1, "a")]
    firsts = [label for n, (i, label) in enumerate(order) if n % 3 == 0]
    assert sorted(firsts) == ["a", "a", "b", "b", "c", "c"]
    assert len(schedule(tasks, ["a", "b"], repeat=3)) == 36


def test_three_arms_run_interleaved_in_one_run_and_are_compared(server, workspace, capsys):
    suite = suite_file(workspace, 12, category=lambda i: "easy" if i < 6 else "hard")
    answer_by_arm(server, prompt=final("4"), constrained=final("4"), native="5")
    code = main(["eval", suite, *ARMS, "--quiet", "--out", "results.json", *endpoint(server)])
    out, err = capsys.readouterr()
    assert code == 0, err
    arms = [arm_of(r["body"]) for r in server.requests]
    assert arms[:6] == ["prompt", "prompt-constrained", "native", "prompt-constrained", "native", "prompt"]
    table, paired = out.split("\n\n")
    assert table.splitlines()[0].split() == ["prompt", "prompt-constrained", "native"]
    assert re.search(r"passed +12 \(100\.0%\) +12 \(100\.0%\) +0 \(0\.0%\)", table)
    rows = {re.split(r" {2,}", line.strip())[0]: re.split(r" {2,}", line.strip())[1:] for line in paired.splitlines()}
    assert rows["prompt vs prompt-constrained"] == ["0", "0", "1.00", "+0.0% [+0.0%, +0.0%]",
                                                    "no significant difference (p=1.00)"]
    assert rows["prompt-constrained vs native"] == ["12", "0", "<0.001", "+100.0% [+100.0%, +100.0%]",
                                                    "prompt-constrained is better than native (p<0.001)"]
    assert "  easy" in paired and "  hard" in paired
    results = json.loads((workspace / "results.json").read_text())
    assert results["settings"]["arms"] == ["prompt", "prompt-constrained", "native"]
    native_vs = results["comparisons"][2]
    assert (native_vs["a"], native_vs["b"], native_vs["won"], native_vs["lost"]) == (
        "prompt-constrained", "native", 12, 0)
    assert native_vs["p_value"] == 2 / 2 ** 12
    assert native_vs["categories"]["easy"]["won"] == 6
    run = results["runs"][2]
    assert run["protocol"] == "native" and run["transcript"] == [
        {"event": "reply", "content": "5", "tool_calls": []}, {"event": "final", "answer": "5"}]


def test_a_small_difference_is_called_not_significant(server, workspace, capsys):
    suite = suite_file(workspace, 10)
    server.answer_when(lambda body: "tools" in body and "Question 0:" in json.dumps(body), "5")
    server.answer_when(lambda body: "tools" in body, "4")
    server.answer_when(lambda body: True, final("4"))
    assert main(["eval", suite, "--protocol", "prompt", "--protocol", "native", "--quiet", *endpoint(server)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"prompt vs native +1 +0 +1\.00 +\+10\.0% \[\+0\.0%, \+30\.0%\] +no significant difference "
                     r"\(p=1\.00\)", out)


def test_the_old_spelling_keeps_its_meaning(server, workspace, capsys):
    suite = suite_file(workspace, 1)
    server.answer_when(lambda body: True, final("4"))
    assert main(["eval", suite, "--protocol", "prompt", "--constrain", "--arm", "native", "--quiet",
                 *endpoint(server)]) == 0
    assert capsys.readouterr().out.splitlines()[0].split() == ["prompt-constrained", "native"]
    assert [arm_of(r["body"]) for r in server.requests] == ["prompt-constrained", "native"]


def test_constrain_without_the_prompt_protocol_is_a_usage_error(workspace, capsys):
    assert main(["eval", "--arm", "native", "--constrain", "--base-url", "http://127.0.0.1:9/v1", "--model",
                 "m"]) == 2
    assert "--constrain applies to the prompt protocol only" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit:
        main(["eval", "--arm", "both", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"])
    assert exit.value.code == 2 and "invalid choice: 'both'" in capsys.readouterr().err


def test_repeats_give_each_task_a_pass_fraction_and_each_arm_an_interval(server, workspace, capsys):
    suite = suite_file(workspace, 4)
    for answer in ["4", "4", "4", "4", "5", "4", "5", "5", "4", "4", "5", "5"]:
        server.reply(final(answer))
    assert main(["eval", suite, "--arm", "prompt", "--repeat", "3", "--quiet", "--out", "r.json",
                 *endpoint(server)]) == 0
    summary = json.loads((workspace / "r.json").read_text())["summary"]["prompt"]
    # repeat 0: t0..t3 pass; repeat 1: t0 fails, t1 passes, t2 t3 fail; repeat 2: t0 t1 pass, t2 t3 fail
    assert summary["task_pass_fractions"] == {"t0": 0.6667, "t1": 1.0, "t2": 0.3333, "t3": 0.3333}
    low, high = summary["interval"]
    assert 0 < low < 7 / 12 < high < 1
    assert "pass rate 95% CI" in capsys.readouterr().out


def test_the_html_report_shows_every_run_with_its_transcript_escaped(server, workspace, capsys):
    suite = suite_file(workspace, 2, category=lambda i: "c<b>")
    hostile = 'I say <script>alert("x")</script> & <img src=x onerror=alert(1)>'
    answer_by_arm(server, prompt="not json " + hostile, constrained=final("4"), native=hostile)
    assert main(["eval", suite, *ARMS, "--quiet", "--html", "report.html", *endpoint(server)]) == 0
    page = (workspace / "report.html").read_text()
    assert "<script" not in page.lower() and "<img" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    assert "c&lt;b&gt;" in page and "<b>re-ask (no_json)</b>" in page
    assert page.count('<details class="task">') == 2 and page.count('<details class="run">') == 6
    assert "<svg" in page and "no significant difference (p=0.50)" in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page) and "<link" not in page
    assert "Question 1: what is 2+2?" in page


def test_output_files_are_checked_before_any_run(workspace, capsys):
    (workspace / "folder").mkdir()
    assert main(["eval", "--html", "folder", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"]) == 2
    assert "--html 'folder' is not a file name" in capsys.readouterr().err


def test_a_terminal_gets_a_progress_bar_and_a_pipe_gets_a_line_per_run(server, workspace):
    suite = suite_file(workspace, 3)
    server.answer_when(lambda body: True, final("4"))
    command = [sys.executable, "-m", "agent", "eval", suite, "--arm", "prompt", "--arm", "prompt-constrained",
               *endpoint(server)]
    primary, secondary = pty.openpty()
    child = subprocess.run(command, stdout=subprocess.PIPE, stderr=secondary, cwd=workspace, env=child_env(),
                           timeout=60)
    os.close(secondary)
    shown = b""
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    os.close(primary)
    text = shown.decode()
    assert child.returncode == 0
    assert "\r\x1b[K[" in text and "6/6 runs" in text and "prompt 3/3 (100%)" in text and "left" in text
    assert "[1/6]" not in text
    piped = subprocess.run(command, capture_output=True, text=True, cwd=workspace, env=child_env(), timeout=60)
    assert piped.returncode == 0 and "[6/6]" in piped.stderr and "\r" not in piped.stderr


def test_many_workers_run_at_once_against_a_server(server, workspace, capsys):
    suite = suite_file(workspace, 32)
    server.gather(32, timeout=20)  # answered once all 32 are open at once: a pool of fewer would wait 20 s
    for _ in range(32):
        server.reply(final("4"))
    assert main(["eval", suite, "--arm", "prompt", "--quiet", *endpoint(server, workers=32)]) == 0
    assert server.most_in_flight == 32  # every worker has its own connection: none waits for another's


def test_the_bar_counts_each_arm_and_estimates_the_time_left():
    from io import StringIO

    from agent.cli.eval_progress import Bar, duration

    now = [0.0]
    out = StringIO()
    bar = Bar(out, ["prompt", "native"], clock=lambda: now[0])
    now[0] = 30.0
    bar({"protocol": "prompt", "passed": True}, 1, 4)
    now[0] = 60.0
    bar({"protocol": "native", "passed": False}, 2, 4)
    assert bar.line(2, 4) == "[############------------] 2/4 runs  prompt 1/1 (100%)  native 0/1 (0%)  1m00s left"
    bar.close()
    assert out.getvalue().count("\r\x1b[K") == 2 and out.getvalue().endswith("\n")
    assert [duration(s) for s in (5, 75, 3725)] == ["5s", "1m15s", "1h02m"]
