"""Course checks (maintainers): what the learner reads from the provided programs is true and quiet.

- an ungrounded citation says which lines WERE shown, and whether they were injected or read;
- the copilot names the first milestone that is not done, not the one it happened to call first;
- a closed pipe (`... | head -3`) ends the copilot, evaluate.py and break_and_observe.py quietly;
- evaluate.py --model without a provider suggests what evaluate.py can do;
- the copilot records its last finished run, which the board reads for M5 (harness/progress.py).
"""

from __future__ import annotations

import importlib
from types import SimpleNamespace

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
