"""A whole copilot run with no key: `python -m harness.demo` (from code/), clearly SCRIPTED.

It replays the run lesson/lesson.agent.md shows in Section 7 ("What a copilot run looks like"):
the model's words (its thoughts, tool calls and answer) are read from that sample and served by the
lab's fake server (harness/fake_server.py) on 127.0.0.1; everything else is real: copilot.py,
LiteLLM's code path, your four functions, the tools, the citation check and the trace. The board's
M5 does not count it: the fake server signs its replies, so the recorded run says "scripted"
(harness/progress.py).

    python -m harness.demo                 # your code (M1-M4 must be done)
    python -m harness.demo --reference     # the reference solution
    python -m harness.demo --structured    # S3: the answer then comes again through emit_answer
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from harness.fake_server import FakeServer, text_reply, tool_reply
from harness.paths import CODE_DIR, REPO_ROOT

LESSON = REPO_ROOT / "lesson" / "lesson.agent.md"
MARKER = "ran and only the model's words were scripted"   # the sentence just above the sample run
BANNER = ("SCRIPTED DEMO: no model is called. The replies below are the lesson's sample run (Section 7), served "
          "by the lab's fake server on 127.0.0.1; copilot.py, LiteLLM, your functions, the tools and the citation "
          "check are real.")


def sample(text: str | None = None) -> tuple[str, list[dict]]:
    """(the question, the model's replies) of the lesson's sample run."""
    text = LESSON.read_text(encoding="utf-8") if text is None else text
    question = re.search(r'python copilot.py --context-only "([^"]+)"', text)[1]
    block = re.search(r"```text\n(.*?)\n```", text.split(MARKER, 1)[1], re.S)[1].splitlines()
    replies, thought = [], None
    for line in block:
        if line.startswith("  Thought: "):
            thought = line.removeprefix("  Thought: ")
        elif line.startswith("  Action: "):
            name, _, args = line.removeprefix("  Action: ").partition("(")
            replies.append(tool_reply((name, json.loads(args[:-1])), content=thought))
    answer = block[block.index("  Answer: (printed below)") + 2]
    return question, [*replies, text_reply(answer)]


CITED = re.compile(r"([\w./-]+\.\w+):(\d+)(?:-(\d+))?")


def emit_answer_reply(answer: str) -> dict:
    """The reply to the copilot's forced emit_answer turn (--structured, S3): the sample's answer with
    the path:line citations it wrote, as emit_answer's arguments."""
    citations = [{"path": path, "start_line": int(start), "end_line": int(end or start)}
                 for path, start, end in CITED.findall(answer)]
    return tool_reply(("emit_answer", {"answer": answer, "citations": citations}))


def replies_for(argv, replies: list[dict]) -> list[dict]:
    """The scripted replies for these copilot options: --structured asks once more, for emit_answer."""
    if "--structured" in argv:
        return [*replies, emit_answer_reply(replies[-1]["content"])]
    return replies


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # copilot.py runs as its own process, as you would run it. No real provider is asked anything:
    # no key is sent, no embedding model is used.
    env = {**os.environ, "COPILOT_API_KEY": "lesson06-demo-not-a-key", "EMBEDDING_MODEL": "",
           "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true"}
    question, replies = sample()
    print(BANNER, end="\n\n", flush=True)
    with FakeServer(replies_for(argv, replies)) as server:
        code = subprocess.call([sys.executable, str(CODE_DIR / "copilot.py"), "--trace", "--repo", str(CODE_DIR),
                                "--model", "openai/lab-fake-model", "--api-base", server.base_url, *argv, question],
                               env=env)
    if code == 0:
        print("\n(SCRIPTED DEMO: the board's M5 still waits for one run with your own provider.)", flush=True)
    return code


if __name__ == "__main__":
    import cli

    sys.exit(cli.run_main(main))
