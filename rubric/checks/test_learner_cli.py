"""Course checks (maintainers): what the learner reads from the provided programs is true and quiet.

- an ungrounded citation says which lines WERE shown, and whether they were injected or read;
- the copilot names the first milestone that is not done, not the one it happened to call first;
- a closed pipe (`... | head -3`) ends the copilot, evaluate.py and break_and_observe.py quietly;
- evaluate.py --model without a provider suggests what evaluate.py can do;
- the copilot records its last finished run, which the board reads for M5 (harness/progress.py).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

citations = importlib.import_module("citations")


def test_an_ungrounded_citation_names_the_lines_shown_and_how(tmp_path):
    (tmp_path / "a.py").write_text("".join(f"x{n} = {n}\n" for n in range(1, 201)))
    injected = [SimpleNamespace(path="a.py", start_line=1, end_line=40)]
    read = [{"role": "tool", "tool_call_id": "r1", "content": "[File: a.py (200 lines total) - showing lines 103-118]\n"},
            {"role": "tool", "tool_call_id": "s1", "content": "a.py:12: x12 = 12\na.py:37: x37 = 37"}]
    both = citations.check_citations("see a.py:150", tmp_path, read, injected)[0]
    assert both.reason == "only lines 1-40, 103-118 were shown (injected: 1-40; read: 12, 37, 103-118)", both.reason
    only_read = citations.check_citations("see a.py:150", tmp_path, read, [])[0]
    assert only_read.reason == "only lines 12, 37, 103-118 were shown (read with a tool)", only_read.reason
    only_injected = citations.check_citations("see a.py:45", tmp_path, [], injected)[0]
    assert only_injected.reason == "only lines 1-40 were shown (injected as context; the file was never read)"
    assert citations.check_citations("see a.py:20", tmp_path, [], injected)[0].grounded


def test_the_first_milestone_not_done_is_named_not_the_first_one_called(monkeypatch):
    """run_agent (M4) raises first, but on fresh stubs M1 is what the learner must do first."""
    import importlib.util
    import sys

    from harness.paths import CODE_DIR

    for name in ("tools", "agent_loop"):  # the shipped stubs, whatever implementation this run tests
        spec = importlib.util.spec_from_file_location(name, CODE_DIR / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, name, module)
        spec.loader.exec_module(module)
    cli = importlib.import_module("cli")
    said = cli.first_not_done("M4: agent_loop.run_agent is not implemented yet")
    assert said.startswith("M1: tools.safe_resolve"), said
    assert cli.first_not_done("S2: stretch.plan_edit is not implemented yet").startswith("M1:")


def _script(tmp: Path, *args):
    import subprocess

    from harness.offline import offline_env
    from harness.paths import CODE_DIR

    env = {k: v for k, v in offline_env(tmp / "cache").items() if k != "LESSON06_IMPL"}
    return subprocess.Popen([sys.executable, *args], cwd=CODE_DIR, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)


@pytest.mark.skipif(sys.platform == "win32", reason="a closed pipe is EPIPE/SIGPIPE on POSIX systems")
@pytest.mark.parametrize("args", [
    ["copilot.py", "--context-only", "why does config default to Groq?"],
    ["evaluate.py", "--reference"],
    ["break_and_observe.py", "all", "--simulate"],
], ids=["copilot", "evaluate", "break_and_observe"])
def test_a_closed_pipe_ends_the_program_quietly(args, tmp_path):
    """`python copilot.py ... | head -3`: the reader goes away; the program stops without a word."""
    proc = _script(tmp_path, *args)
    proc.stdout.close()  # before the program writes anything: its first write meets a closed pipe
    err = proc.stderr.read()
    proc.wait(timeout=120)
    assert err == "" and proc.returncode == 141, f"exit {proc.returncode}, stderr: {err[-1500:]}"


@pytest.mark.parametrize("script", ["evaluate.py", "break_and_observe.py"])
def test_model_without_a_provider_suggests_what_this_program_can_do(script, tmp_path):
    args = [script, "--model", "--reference"] if script == "evaluate.py" else [script, "runaway", "--model", "--simulate"]
    proc = _script(tmp_path, *args)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "no model provider is configured" in err, err
    assert "--context-only" not in err and "without --model" in err, err


def test_the_summary_line_keeps_model_time_apart_from_start_up():
    llm, report = importlib.import_module("llm"), importlib.import_module("report")
    usage = llm.Usage(steps=3, prompt_tokens=7282, completion_tokens=170, model_seconds=2.1, startup_seconds=5.9)
    result = SimpleNamespace(usage=usage, tool_calls=[{}, {}], wall_seconds=8.3, termination="answered")
    line = report.summary_line(result)
    assert "| 8.3 s (model 2.1 s, LiteLLM start-up 5.9 s) |" in line, line
    result.usage = llm.Usage(steps=1)  # a scripted model: no provider time to report
    assert "| 8.3 s |" in report.summary_line(result)
