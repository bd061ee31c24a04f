"""The copilot end to end on a model running on this machine: llama.cpp's llama-server and a GGUF file.

    python bench/bench_local.py --gguf ~/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
    python bench/bench_local.py --gguf M.gguf --server ~/llama.cpp/build/bin/llama-server --only shop-total-bug,tax-rate
    python bench/bench_local.py --base-url http://127.0.0.1:8091/v1 --alias qwen-1.5b   # a server already running

Starts ``llama-server -m GGUF --jinja`` on a loopback port (``--server``, else LLAMA_SERVER, else
``llama-server`` on PATH), waits until it is ready, then runs every question of the chosen sets
(default: the fixture set on fixture_repo and the lab set on code/) the way ``evaluate.py --model``
does (harness/evaluation.py's evaluate_question, the reference implementation by default), once
per ``--top-k`` value (default 3 and 0: injected context, then none), and stops the server.

Per question: tool calls (errors, repeats; how many were written as text and recovered,
text_calls.py), steps, citations (grounded), the expected citation, the expected symbols named,
tokens, wall time and how the run ended. ``--out FILE`` keeps every score as JSON. A measurement,
not a test: a CPU model takes minutes per question, and answers vary between runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from dataclasses import asdict
from pathlib import Path

CODE_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(CODE_DIR))

DEFAULT_PORT = 8091
READY_SECONDS = 600          # loading a GGUF from a slow disk on a busy machine


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="bench_local.py", description="The copilot on a local llama-server model.")
    parser.add_argument("--gguf", help="the model file (GGUF) to serve")
    parser.add_argument("--server", help="the llama-server binary (default: LLAMA_SERVER, else llama-server on PATH)")
    parser.add_argument("--base-url", help="use a server that is already running (loopback only), e.g. http://127.0.0.1:8091/v1")
    parser.add_argument("--alias", default="local", help="the model's name on the server (default: local)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--ctx", type=int, default=8192, help="the server's context window in tokens (default 8192)")
    parser.add_argument("--sets", default="fixture,lab", help="question sets, comma-separated (default: fixture,lab)")
    parser.add_argument("--only", help="question ids, comma-separated (default: all)")
    parser.add_argument("--top-k", default="3,0", help="--top-k values, comma-separated (default: 3,0)")
    parser.add_argument("--max-steps", type=int, default=None, help="model calls per question (default: the loop's)")
    parser.add_argument("--learner", action="store_true", help="run your code/ instead of the reference solution")
    parser.add_argument("--out", help="write every score as JSON here")
    args = parser.parse_args(argv)
    if not args.base_url and not args.gguf:
        parser.error("give --gguf (to start llama-server) or --base-url (a server already running)")
    return args


def server_binary(given: str | None) -> str:
    found = given or os.environ.get("LLAMA_SERVER") or shutil.which("llama-server")
    if not found or not Path(found).is_file():
        raise SystemExit("bench_local: no llama-server: pass --server PATH or set LLAMA_SERVER "
                         "(build it from llama.cpp: cmake --build build --target llama-server)")
    return found


def start_server(args) -> subprocess.Popen:
    command = [server_binary(args.server), "-m", str(Path(args.gguf).expanduser()), "--alias", args.alias,
               "--jinja", "-t", str(args.threads), "-c", str(args.ctx), "--host", "127.0.0.1", "--port", str(args.port)]
    print("starting:", " ".join(command), file=sys.stderr)
    log = open(Path(os.environ.get("TMPDIR", "/tmp")) / f"bench_local_{args.port}.log", "w")
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)


def wait_ready(base_url: str, process=None) -> float:
    """Seconds until /health answers 200 (the model is loaded)."""
    started = time.perf_counter()
    health = base_url.rsplit("/v1", 1)[0] + "/health"
    while time.perf_counter() - started < READY_SECONDS:
        if process is not None and process.poll() is not None:
            raise SystemExit(f"bench_local: llama-server exited with code {process.returncode} (see its log)")
        try:
            with urllib.request.urlopen(health, timeout=5) as response:
                if response.status == 200:
                    return time.perf_counter() - started
        except OSError:
            pass
        time.sleep(2)
    raise SystemExit(f"bench_local: {health} was not ready within {READY_SECONDS} s")


def run(args, base_url: str) -> list[dict]:
    from harness.lab import real_model, use_implementation

    use_implementation(None if args.learner else "reference")
    import evaluate
    import llm
    import local_server
    from harness.evaluation import evaluate_question, load_questions

    if not local_server.is_local(base_url):
        raise SystemExit(f"bench_local: {base_url} is not a loopback address; this benchmark measures a local model")
    os.environ["COPILOT_NO_DOTENV"] = "1"  # code/.env must not choose another model or key
    complete, totals, label = real_model(f"openai/{args.alias}", base_url)
    only = set(args.only.split(",")) if args.only else None
    rows = []
    for top_k in (int(k) for k in args.top_k.split(",")):
        for set_name in args.sets.split(","):
            path, repo = evaluate.QUESTION_SETS[set_name]
            for q in load_questions(path):
                if only and q.id not in only:
                    continue
                recovered, started = complete.usage.recovered_calls, time.perf_counter()
                try:
                    score = asdict(evaluate_question(q, repo, complete, run=f"top-k {top_k}", usage=totals,
                                                     max_steps=args.max_steps, top_k=top_k, use_context=top_k > 0))
                except Exception as exc:  # the provider failed (a timeout): one row says so, the others still run
                    score = failed_score(q, llm.describe_error(exc), time.perf_counter() - started)
                row = {"set": set_name, "top_k": top_k, "recovered": complete.usage.recovered_calls - recovered, **score}
                rows.append(row)
                print(table_row(row), file=sys.stderr, flush=True)
    print(f"model: {label} at {base_url}", file=sys.stderr)
    return rows


def failed_score(q, line: str, wall: float) -> dict:
    """A row for a question whose run raised (the table's columns, nothing measured but the time)."""
    return {"id": q.id, "tool_calls": 0, "tool_errors": 0, "repeats": 0, "steps": 0, "citations": 0, "grounded": 0,
            "expected_citation": False, "symbols_found": [], "symbols_expected": list(q.expected_symbols),
            "tokens_in": 0, "tokens_out": 0, "wall_seconds": wall, "ended": f"error: {line}", "answer": ""}


HEADER = ("| set | question | top-k | tool calls (errors, repeats; recovered) | steps | citations (grounded) "
          "| expected citation | symbols | tokens in/out | wall s | ended |\n"
          "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")


def table_row(r: dict) -> str:
    symbols = f"{len(r['symbols_found'])}/{len(r['symbols_expected'])}"
    return (f"| {r['set']} | {r['id']} | {r['top_k']} | {r['tool_calls']} ({r['tool_errors']}, {r['repeats']}; "
            f"{r['recovered']}) | {r['steps']} | {r['citations']} ({r['grounded']}) | "
            f"{'yes' if r['expected_citation'] else 'no'} | {symbols} | {r['tokens_in']:,}/{r['tokens_out']:,} | "
            f"{r['wall_seconds']:.0f} | {r['ended']} |")


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    base_url = args.base_url or f"http://127.0.0.1:{args.port}/v1"
    process = None if args.base_url else start_server(args)
    try:
        print(f"server ready after {wait_ready(base_url, process):.0f} s", file=sys.stderr)
        rows = run(args, base_url)
    finally:
        if process is not None:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
    print(HEADER)
    for row in rows:
        print(table_row(row))
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
