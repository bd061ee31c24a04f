"""A whole copilot run with no key: `python -m harness.demo` (from code/), clearly SCRIPTED.

The model's words come from this file, served by the lab's fake server (harness/fake_server.py) on
127.0.0.1; everything else is real: copilot.py, LiteLLM's code path, your four functions, the
tools, the citation check and the trace. It is the run lesson/lesson.agent.md shows in Section 7
("What a copilot run looks like"). The board's M5 does not count it: the fake server signs its
replies, so the recorded run says "scripted" (harness/progress.py).

    python -m harness.demo                 # your code (M1-M4 must be done)
    python -m harness.demo --reference     # the reference solution
"""

from __future__ import annotations

import ast
import os
import sys

from harness.fake_server import FakeServer, text_reply, tool_reply
from harness.paths import CODE_DIR

QUESTION = "why does config default to Groq?"
BANNER = ("SCRIPTED DEMO: no model is called. The replies below were written in harness/demo.py and served by "
          "the lab's fake server on 127.0.0.1; copilot.py, LiteLLM, your functions, the tools and the citation "
          "check are real.")


def script() -> list[dict]:
    """The model's side of the run, with line numbers taken from config.py as it is now."""
    source = (CODE_DIR / "config.py").read_text(encoding="utf-8")
    lines = source.splitlines()
    fn = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == "default_model")
    loop = next(n for n in fn.body if isinstance(n, ast.For))
    groq = next(i for i, line in enumerate(lines, 1) if line.strip().startswith('("GROQ_API_KEY"'))
    answer = (f"default_model() returns COPILOT_MODEL if set, otherwise the model of the first provider in "
              f"PROVIDER_DEFAULTS whose key is present (config.py:{loop.lineno}-{loop.end_lineno}), and "
              f"GROQ_API_KEY is listed first (config.py:{groq}).")
    return [
        tool_reply(("search_code", {"query": "PROVIDER_DEFAULTS"}), content="Find where the default provider is chosen."),
        tool_reply(("read_file", {"path": "config.py", "start_line": fn.lineno, "end_line": fn.end_lineno}),
                   content="Read default_model."),
        text_reply(answer),
    ]


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--reference" in argv:
        os.environ["LESSON06_IMPL"] = "reference"
    # No real provider is asked anything: no key is sent, no embedding model is used.
    os.environ.update({"COPILOT_API_KEY": "lesson06-demo-not-a-key", "EMBEDDING_MODEL": "",
                       "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true"})
    import copilot  # after the implementation is chosen

    print(BANNER, end="\n\n", flush=True)
    with FakeServer(script()) as server:
        code = copilot.main(["--trace", "--repo", str(CODE_DIR), "--model", "openai/lab-fake-model",
                             "--api-base", server.base_url, *[a for a in argv if a != "--reference"], QUESTION])
    print(f"\n({BANNER.split(':')[0]}: the board's M5 still waits for one run with your own provider.)")
    return code


if __name__ == "__main__":
    import cli

    sys.exit(cli.run_main(main))
