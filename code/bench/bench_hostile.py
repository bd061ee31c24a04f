"""Timings of the pathological cases of issue #21 (round three), after the fixes.

    python bench/bench_hostile.py        # from code/; about a minute; builds its trees in a temp folder

  search   tools.search_code over 128 identical 2 MB files: "x" (every line), a non-ASCII query
           and one found nowhere, and "marker" (the last line of each file)
  index    context_selector.load_index on that tree, and on 1,024 files of 128 KB (131 MB)
  drip     one chat call and one embedding call against a loopback server sending one byte
           every 0.2 s, under a 3 s deadline
A measurement: nothing here is a test (rubric/checks/test_hostile_round3.py holds the checks).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

CODE_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(CODE_DIR.parent / "rubric" / "reference"))  # the finished tools (safe_resolve)
sys.path.insert(1, str(CODE_DIR))
sys.path.insert(2, str(CODE_DIR.parent / "rubric" / "checks"))  # raw_server.py
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")


def timed(label: str, fn):
    started = time.perf_counter()
    try:
        result = fn()
    except Exception as exc:  # a measurement: report what ended it
        result = f"{type(exc).__name__}: {exc}"
    print(f"{label:<44} {time.perf_counter() - started:7.2f} s   {str(result).splitlines()[-1][:110]}")
    return result


def main() -> int:
    import config
    import context_selector
    import embeddings
    import llm
    import tools
    from raw_server import RawServer, chat_body

    work = Path(tempfile.mkdtemp(prefix="bench-hostile-"))
    try:
        big = work / "big"
        big.mkdir()
        block = ("x = 1  # a line with an x\n" * (1_999_000 // 26)).encode() + b"marker = 1\n"
        for i in range(128):
            (big / f"f{i:03}.py").write_bytes(block)
        timed("search_code('x'), 128 x 2 MB", lambda: tools.search_code(big, "x"))
        timed("search_code('\u00fc'), 128 x 2 MB", lambda: tools.search_code(big, "\u00fc"))
        timed("search_code('nowhere'), 128 x 2 MB", lambda: tools.search_code(big, "nowhere"))
        timed("search_code('marker'), once per file", lambda: tools.search_code(big, "marker"))
        timed("load_index, 128 x 2 MB", lambda: context_selector.load_index(big, cache_dir=work / "c1").n_chunks)
        many = work / "many"
        many.mkdir()
        text = "".join(f"def f{i}(a, b):\n    return a + b * {i}\n\n" for i in range(128_000 // 40)).encode()
        for i in range(1024):
            (many / f"m{i:04}.py").write_bytes(text)
        timed("load_index, 1,024 x 128 KB (131 MB)", lambda: context_selector.load_index(many, cache_dir=work / "c2").n_chunks)

        llm.REQUEST_TIMEOUT = 3
        settings = config.load_settings(env={"COPILOT_MODEL": "openai/fake", "COPILOT_NO_DOTENV": "1",
                                             "COPILOT_API_BASE": "http://127.0.0.1:9/v1"})
        llm.import_litellm()
        with RawServer(chat_body(content_json='"' + "x" * 400 + '"'), drip=0.2) as server:
            settings = dataclasses.replace(settings, api_base=server.base_url)
            timed("chat call, 1 byte / 0.2 s, 3 s deadline", lambda: llm.make_complete(settings)(
                [{"role": "user", "content": "hi"}], []))
        embeddings.QUERY_TIMEOUT = 3
        body = b'{"object":"list","data":[{"object":"embedding","index":0,"embedding":[' + b"0.5," * 200 + b'0.5]}]}'
        with RawServer(body, drip=0.2) as server:
            embed = embeddings.LiteLLMEmbedder("openai/e", server.base_url, "x")
            timed("embedding call, 1 byte / 0.2 s, 3 s deadline", lambda: embed.query(["q"]))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
