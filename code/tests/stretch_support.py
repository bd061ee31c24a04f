"""Helpers shared by the stretch tests (test_s1_*, test_s2_*, test_s3_*). Not a test file."""

from __future__ import annotations

import re


def main(copilot, capsys, argv, complete):
    """copilot.main in this process with a scripted model: (exit code, stdout, stderr).

    copilot turns a stub's NotImplementedError into "S<n> is not done yet: ..." and exit code 2;
    this turns it back, so the board names the milestone that is not done."""
    code = copilot.main(argv, complete=complete)
    out, err = capsys.readouterr()
    found = re.search(r"\b([MS]\d) is not done yet: (.*)", err)
    if found:
        raise NotImplementedError(f"{found[1]}: {found[2]}")
    return code, out, err


class Forcing:
    """A scripted model that also takes ``tool_choice``, as copilot's LiteLLM ``complete`` does.

    Records what each request asked for, then lets ``model`` (usually a StrictProvider) answer."""

    def __init__(self, model):
        self.model = model
        self.choices: list = []
        self.tools: list[list[str]] = []

    def __call__(self, messages, tools, tool_choice="auto"):
        self.choices.append(tool_choice)
        self.tools.append([t["function"]["name"] for t in tools])
        return self.model(messages, tools)

