"""Ask a question about a repository; a model answers by reading the code through tools.

    python copilot.py "why does config default to Groq?"            # --repo defaults to "."
    python copilot.py --repo fixture_repo "why does order_total fail?" --trace
    python copilot.py --context-only "session cookie"                 # no model, no key needed
    python copilot.py --check                                         # is the model set up? (before M5)

On a terminal, stderr shows each step as it happens (live.py; --progress / --no-progress decide).

Stretch milestones (stretch.py): --trace and --json show the reasoning trace (S1); --allow-edits
offers the edit_file tool as a dry run, --apply writes after you confirm (S2); --structured asks
for the final answer through the emit_answer tool and checks its citations (S3).

This file is only the wiring. Read it top to bottom: the data flows one way, each step in its module.
    parse_args()                      the question and the options
    config.load_settings()            which model, which key                (config.py)
    context_selector.select_context() snippets injected up front            (context_selector.py)
    build_messages()                  system prompt + context + question
    agent_loop.run_agent()            YOUR loop: model -> tools -> model ...  (agent_loop.py, tools.py)
                                      each model call through llm.py (LiteLLM, retries, usage)
    citations.check_citations()       every path:line the answer cites, checked against the run
    report.print_report() / --json    answer, citations, one summary line   (report.py)

Exit codes: 0 answered; 1 stopped without an answer (max steps, an empty reply, or a reply that is
only a tool call written as text); 2 could not run (no provider,
bad repository path, authentication, provider unreachable, refused, rate limited or overloaded
after retries, your code not done yet). `--check` exits 0 when the setup works, else 2.
A structured answer (--structured) that still fails validation after one retry also exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict
from functools import partial
from pathlib import Path

CODE_DIR = Path(__file__).resolve().parent
REFERENCE_DIR = CODE_DIR.parent / "rubric" / "reference"

# --reference runs the finished lab in rubric/reference/: put it first on the import path before
# tools and agent_loop are imported (LESSON06_IMPL=reference does the same for any process).
if __name__ == "__main__" and "--reference" in sys.argv[1:]:
    os.environ["LESSON06_IMPL"] = "reference"
if os.environ.get("LESSON06_IMPL") == "reference" and str(REFERENCE_DIR) not in sys.path[:1]:
    sys.path.insert(0, str(REFERENCE_DIR))

import agent_loop  # noqa: E402  (after the import path is chosen)
import citations  # noqa: E402
import cli  # noqa: E402
import config  # noqa: E402  (sets LiteLLM's offline price map before anything imports litellm)
import context_selector  # noqa: E402
import live  # noqa: E402  (the run you can watch, on stderr)
import llm  # noqa: E402
import local_server  # noqa: E402
import preflight  # noqa: E402  (--check)
import report  # noqa: E402
import stretch  # noqa: E402  (the opt-in stretch milestones S1-S3, from the implementation under test)
import text_calls  # noqa: E402
import tools  # noqa: E402


# --------------------------------------------------------------------------- command line

def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="copilot.py", description="Answer a question about a repository by reading it through tools.")
    parser.add_argument("question", nargs="?", help='for example "why does config default to Groq?"')
    parser.add_argument("--repo", default=".", help="the repository to ask about (default: the current directory)")
    parser.add_argument("--model", help="LiteLLM model name, e.g. groq/openai/gpt-oss-20b (default: from code/.env)")
    parser.add_argument("--api-base", help="URL of a local or OpenAI-compatible server (default: COPILOT_API_BASE)")
    parser.add_argument("--max-steps", type=int, default=agent_loop.DEFAULT_MAX_STEPS, help="model calls at most (default: %(default)s)")
    parser.add_argument("--top-k", type=int, default=context_selector.DEFAULT_TOP_FILES, help="files to inject context from (default: %(default)s)")
    parser.add_argument("--no-context", action="store_true", help="inject nothing; the model must find everything with tools")
    parser.add_argument("--context-only", action="store_true", help="print the selected snippets and stop (no model, no key)")
    parser.add_argument("--trace", action="store_true", help="print Thought -> Action -> Observation for every step")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="show each step on stderr as it happens (default: when stderr is a terminal)")
    parser.add_argument("--json", action="store_true", help="print one JSON document on stdout and nothing else")
    parser.add_argument("--save-transcript", metavar="FILE", help="write the whole conversation as JSON")
    parser.add_argument("--env-file", metavar="FILE", help="read settings from FILE instead of code/.env")
    stretch_flags = parser.add_argument_group("stretch milestones (stretch.py)")
    stretch_flags.add_argument("--allow-edits", action="store_true",
                               help="S2: offer the edit_file tool; a dry run shows each diff and changes nothing")
    stretch_flags.add_argument("--apply", action="store_true",
                               help="S2: with --allow-edits, write each edit after you confirm it (y/N)")
    stretch_flags.add_argument("--yes", action="store_true",
                               help="S2: with --apply, confirm every edit without asking (needed with --json or without a terminal)")
    stretch_flags.add_argument("--structured", action="store_true",
                               help="S3: force the final answer through the emit_answer tool and validate its citations")
    parser.add_argument("--check", action="store_true", help="check the model setup with two tiny requests and stop (before M5)")
    parser.add_argument("--reference", action="store_true", help="run with the reference solution in rubric/reference/")
    args = parser.parse_args(argv)
    if args.question is None and not args.check:
        parser.error("the question is required (or run --check)")
    return args


def main(argv=None, complete=None) -> int:
    """The command line. ``complete`` (tests only) replaces LiteLLM with a scripted model."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.check:
        return preflight.check(model=args.model, api_base=args.api_base, env_file=args.env_file, json_output=args.json)
    settings = None
    try:
        if args.max_steps < 1 or args.top_k < 0:
            raise ValueError("--max-steps must be 1 or more and --top-k 0 or more")
        root = check_repo(args.repo)
        if args.context_only:
            return context_only(args, root)
        edits = stretch.edit_policy(args.allow_edits, args.apply, args.yes, json_output=args.json)
        if complete is None:
            settings = config.load_settings(model=args.model, api_base=args.api_base, env_file=args.env_file)
            for problem in config.base_url_problems(settings.model, settings.api_base):
                print(f"copilot: warning: {report.terminal_safe(problem)}", file=sys.stderr)
        watch = live.LiveView(sys.stderr, ticking=live.wanted(None, sys.stderr), model=getattr(settings, "model", None) or "scripted") \
            if live.wanted(args.progress, sys.stderr) else None
        result = run(args.question, root, settings=settings, complete=complete, max_steps=args.max_steps,
                     top_k=args.top_k, use_context=not args.no_context, structured=args.structured, edits=edits,
                     watch=watch)
    except KeyboardInterrupt:
        return fail("interrupted", args)
    except BrokenPipeError:
        raise  # the reader closed stdout (| head): cli.run_main ends quietly
    except Exception as exc:  # every way of not running ends as one clear line and exit code 2
        if os.environ.get("COPILOT_DEBUG") == "1":
            raise
        return fail(llm.describe_error(exc, settings), args)
    if settings is not None:  # a real model ran end to end: the board's M5 stops being pending
        report.save_last_run(result, settings.cache_dir)
    if args.save_transcript:
        problem = report.save_transcript(result, args.save_transcript)
        if problem:  # the answer is still printed below
            print(f"copilot: {report.terminal_safe(problem)}", file=sys.stderr)
    if args.json:
        print(cli.json_text(result.to_json()))
    else:
        report.print_report(result, trace=args.trace)
    return result.exit_code


# --------------------------------------------------------------------------- the run

def run(question: str, repo_root=".", *, settings=None, complete=None, max_steps=None, top_k=3,
        use_context=True, embed=None, cache_dir=None, structured=False, edits=None, watch=None) -> report.Result:
    """Answer ``question`` about ``repo_root``: select context, run the loop, check the citations.

    ``complete`` replaces LiteLLM (tests pass a scripted model); otherwise ``settings`` (default:
    config.load_settings()) says which model to call. Raises cli.NotDoneYet when a learner-owned
    function is not implemented, ValueError for a bad repository, and LiteLLM's errors as they come.

    Stretch: ``edits`` (a stretch.EditPolicy) offers the edit_file tool (S2); ``structured`` forces
    the final answer through emit_answer and validates it (S3; ``complete`` must then accept
    ``tool_choice=``). ``watch`` (a live.LiveView) shows each step on stderr as it happens.
    """
    started = time.perf_counter()
    root = check_repo(repo_root)
    usage = llm.Usage()
    if complete is None:
        settings = settings or config.load_settings()
        complete = llm.make_complete(settings, usage)
    if embed is None and settings is not None:
        embed = context_selector.LiteLLMEmbedder.from_settings(settings)  # None without EMBEDDING_MODEL
    if cache_dir is None:
        cache_dir = settings.cache_dir if settings is not None else config.default_cache_dir()
    snippets = context_selector.select_context(question, root, k=top_k, embed=embed, cache_dir=cache_dir,
                                               budget=context_budget(settings, question),
                                               exclude=context_selector.lab_data(root)) if use_context else []
    messages = build_messages(question, snippets, edits=edits is not None)
    steps = agent_loop.DEFAULT_MAX_STEPS if max_steps is None else max_steps
    model = llm.counting(complete, usage, watch)
    extra = {} if edits is None else {
        "edit_file": (stretch.EDIT_FILE_SCHEMA, partial(stretch.edit_file_tool, policy=edits))}
    final = None
    try:
        with tools.recording():  # what the tools returned, as data: the citation check reads it
            with stretch.extra_tools(model, extra) as offered:  # no extra tools: nothing changes
                answer = agent_loop.run_agent(messages, root, offered, max_steps=steps)
            capped = isinstance(answer, str) and answer.startswith(agent_loop.MAX_STEPS_REACHED)
            if structured and not capped:
                final = stretch.finish_with_emit_answer(messages, root, model, snippets)
                answer = final.answer
            if capped:
                cited = []
            elif final is not None:
                cited = citations.structured_citations(final, root, messages, snippets)
            else:
                cited = citations.check_citations(answer, root, messages, snippets)
    except NotImplementedError as exc:  # a learner-owned function (M1-M4, S1-S3) is still a stub
        raise cli.NotDoneYet(cli.first_not_done(str(exc))) from None
    # A reply with no text and no tool call ends the loop too, but it is not an answer: a reasoning
    # model that spent its token cap thinking, a safety filter, a provider's hiccup.
    empty = not capped and final is None and not (isinstance(answer, str) and answer.strip())
    # A reply that is only a tool call written as JSON: the model meant to call a tool and the
    # provider did not see a call. Not an answer either (text_calls.py).
    written = not capped and final is None and text_calls.is_written_call(answer)
    termination = ("max_steps" if capped else "empty_answer" if empty else "tool_call_as_text" if written else
                   "invalid_answer" if final and not final.accepted else "answered")
    if watch is not None:
        watch.finished(termination, usage.steps, messages)
    return report.Result(
        question=question, repo=str(root), model=getattr(settings, "model", None) or "scripted",
        answer=answer, termination=termination, messages=messages, snippets=snippets,
        citations=cited, usage=usage, wall_seconds=time.perf_counter() - started,
        structured=final, edits=None if edits is None else edits.log,
    )


# --------------------------------------------------------------------------- the first prompt

SYSTEM_PROMPT = """\
You answer questions about one code repository. You can read it only through the tools \
read_file, list_directory and search_code; paths are relative to the repository root.

Rules:
1. Read before you answer. Base every claim on code you saw in this conversation (the injected \
context or a tool result). If you have not seen it, look it up; do not guess.
2. Cite your evidence as path:line or path:start-end, with the paths and line numbers the tools \
and the context show.
3. If what you found is not enough, say which evidence is missing instead of guessing.
4. To use a tool, call it; do not describe the call in prose. Before each tool call, write one \
sentence, your Thought: what you are looking for and why.
5. Answer briefly: the answer first, then the citations that support it."""

# Added to the rules when --allow-edits offers the edit_file tool (stretch milestone S2).
EDIT_RULE = (
    "6. You may also change files with edit_file (replace one exact, unique piece of text). Change "
    "a file only when the question asks for a change; test files are off limits."
)

CONTEXT_HEADER = (
    "[Injected context: snippets that context_selector.py picked for this question before you "
    "started. They may be incomplete or off-topic; read the files to confirm.]"
)
CONTEXT_FOOTER = "[End of injected context]"
NO_CONTEXT_NOTE = "[No context was injected: use the tools to find the relevant code.]"


def build_messages(question: str, snippets, edits: bool = False) -> list[dict]:
    """System prompt, then one user message: the injected context (marked as such), then the question."""
    if snippets:
        context = f"{CONTEXT_HEADER}\n{context_selector.render_snippets(snippets)}\n{CONTEXT_FOOTER}"
    else:
        context = NO_CONTEXT_NOTE
    system = f"{SYSTEM_PROMPT}\n{EDIT_RULE}" if edits else SYSTEM_PROMPT
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": f"{context}\n\nQuestion: {question}"},
    ]


def context_budget(settings, question: str) -> int:
    """Characters of injected context: CONTEXT_CHAR_BUDGET, or less for a local server whose context
    window cannot hold it beside the prompt and the tool schemas (said on stderr; local_server.py)."""
    budget = context_selector.CONTEXT_CHAR_BUDGET
    if settings is None or not local_server.is_local_model(settings):
        return budget  # a hosted provider: no extra request, nothing changes
    fixed = sum(map(len, (SYSTEM_PROMPT, json.dumps(tools.TOOL_SCHEMAS), CONTEXT_HEADER, CONTEXT_FOOTER, question)))
    budget, note = local_server.context_budget(settings, fixed, budget)
    if note:
        print(f"copilot: {note}", file=sys.stderr)
    return budget


# --------------------------------------------------------------------------- small helpers of main()

def check_repo(repo_root) -> Path:
    root = Path(repo_root).expanduser()
    if not root.is_dir():
        raise ValueError(f"--repo {str(repo_root)!r} is not a directory")
    return root.resolve()


def context_only(args, root: Path) -> int:
    """--context-only: the snippets the model would get, with no model and no key."""
    settings = config.load_settings(need_model=False, env_file=args.env_file)
    embed = context_selector.LiteLLMEmbedder.from_settings(settings)
    snippets = context_selector.select_context(args.question, root, k=args.top_k, embed=embed, cache_dir=settings.cache_dir,
                                               exclude=context_selector.lab_data(root))
    if args.json:
        print(cli.json_text({"question": args.question, "repo": str(root),
                             "context": [{k: v for k, v in asdict(s).items() if k != "key"} for s in snippets]}))
    elif snippets:
        print(report.terminal_safe(context_selector.render_snippets(snippets)))
    else:
        print("(no snippet shares a word with the question)")
    return 0


def fail(message: str, args) -> int:
    print(f"copilot: {report.terminal_safe(message)}", file=sys.stderr)
    if args.json:
        print(cli.json_text({"error": message, "exit_code": 2}))
    return 2


if __name__ == "__main__":
    sys.exit(cli.run_main(main))
