"""Ask a question about a repository; a model answers by reading the code through tools.

    python copilot.py "why does config default to Groq?"            # --repo defaults to "."
    python copilot.py --repo fixture_repo "why does order_total fail?" --trace
    python copilot.py --context-only "session cookie"                 # no model, no key needed

Stretch milestones (stretch.py): --trace and --json show the reasoning trace (S1); --allow-edits
offers the edit_file tool as a dry run, --apply writes after you confirm (S2); --structured asks
for the final answer through the emit_answer tool and checks its citations (S3).

The wiring, top to bottom (one direction, no back-and-forth):
    config.load_settings()            which model, which key          (config.py)
    context_selector.select_context() snippets injected up front      (context_selector.py)
    build_messages()                  system prompt + context + question
    agent_loop.run_agent()            YOUR loop: model -> tools -> model ...  (M1-M4)
    check_citations()                 every path:line the answer cites, checked against the run
    print_report() / --json           answer, citations, one summary line

Exit codes: 0 answered; 1 stopped without an answer (max steps); 2 could not run (no provider,
bad repository path, authentication, provider unreachable, rate limited, your code not done yet).
A structured answer (--structured) that still fails validation after one retry also exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from dataclasses import asdict, dataclass, field, is_dataclass
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

# stretch.py imports this module back: run as a script, it must find *this* module, not load a copy.
if __name__ == "__main__":
    sys.modules.setdefault("copilot", sys.modules[__name__])

import agent_loop  # noqa: E402  (after the import path is chosen)
import config  # noqa: E402  (sets LiteLLM's offline price map before anything imports litellm)
import context_selector  # noqa: E402
import stretch  # noqa: E402  (the stretch milestones S1-S3, from the implementation under test)
import tools  # noqa: E402

MAX_ANSWER_TOKENS = 1_024       # per model call; Anthropic requires a value and defaults huge
REQUEST_TIMEOUT = 60            # seconds for one model call
RATE_LIMIT_RETRIES = 2          # after that, exit 2 with a clear line
RATE_LIMIT_WAIT = 4.0           # seconds before the first retry; doubles each time
TRACE_OBSERVATION_CHARS = 240   # --trace shortens each observation to this

SYSTEM_PROMPT = """\
You answer questions about one code repository. You can read it only through the tools \
read_file, list_directory and search_code; paths are relative to the repository root.

Rules:
1. Read before you answer. Base every claim on code you saw in this conversation (the injected \
context or a tool result). If you have not seen it, look it up; do not guess.
2. Cite your evidence as path:line or path:start-end (for example shop/models.py:10), using the \
line numbers the tools and the context show.
3. If what you found is not enough, say which evidence is missing instead of guessing.
4. Before each tool call, write one sentence, your Thought: what you are looking for and why.
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

# path:line or path:start-end, where the path has a file extension ("config.py:40", "a/b.md:3-9").
CITATION = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]*\w\.[A-Za-z0-9_]+):(\d+)(?:\s*[-\u2013]\s*(\d+))?")
READ_HEADER = re.compile(r"^\[File: (.+?) \((\d+) lines total\) - showing lines (\d+)-(\d+)\]", re.M)
SEARCH_HIT = re.compile(r"^(.+?):(\d+): ", re.M)


# --------------------------------------------------------------------------- results

@dataclass
class Usage:
    """What the run cost: model calls, tokens, dollars (None when LiteLLM has no price for the model)."""

    steps: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None

    def record(self, response) -> None:
        usage = getattr(response, "usage", None)
        self.prompt_tokens += getattr(usage, "prompt_tokens", 0) or 0
        self.completion_tokens += getattr(usage, "completion_tokens", 0) or 0
        cost = _cost_of(response)
        if cost is not None:
            self.cost_usd = (self.cost_usd or 0.0) + cost


@dataclass
class Citation:
    """One ``path:line`` the answer cited, and what the check found."""

    path: str
    line: int
    end_line: int
    exists: bool = False      # a visible file inside the repository
    in_range: bool = False    # the lines exist in that file
    seen: bool = False        # those lines were injected or returned by a tool in this run
    reason: str = ""

    @property
    def grounded(self) -> bool:
        return self.exists and self.in_range and self.seen


@dataclass
class Result:
    """Everything one run produced; ``to_json()`` is what --json prints."""

    question: str
    repo: str
    model: str
    answer: str
    termination: str                     # "answered", "max_steps" or "invalid_answer" (--structured)
    messages: list = field(default_factory=list)
    snippets: list = field(default_factory=list)
    citations: list = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    wall_seconds: float = 0.0
    structured: stretch.StructuredAnswer | None = None   # --structured (S3): how emit_answer went
    edits: list | None = None            # --allow-edits (S2): one entry per edit_file call

    @property
    def exit_code(self) -> int:
        return 0 if self.termination == "answered" else 1

    @property
    def tool_calls(self) -> list[dict]:
        return tool_calls_of(self.messages)

    def to_json(self, with_trace: bool = True) -> dict:
        data = {
            "question": self.question,
            "repo": self.repo,
            "model": self.model,
            "answer": self.answer,
            "termination": self.termination,
            "exit_code": self.exit_code,
            "citations": [{**asdict(c), "grounded": c.grounded} for c in self.citations],
            "tool_calls": self.tool_calls,
            "context": [{"path": s.path, "start_line": s.start_line, "end_line": s.end_line, "score": s.score}
                        for s in self.snippets],
            "usage": {**asdict(self.usage), "tool_calls": len(self.tool_calls),
                      "wall_seconds": round(self.wall_seconds, 3)},
        }
        if with_trace:
            steps, note = trace_or_note(self.messages)
            data["trace"] = None if steps is None else [asdict(s) if is_dataclass(s) else s for s in steps]
            if note:
                data["trace_note"] = note
        if self.structured is not None:
            data["structured"] = asdict(self.structured)
        if self.edits is not None:
            data["edits"] = self.edits
        return data


class NotDoneYet(NotImplementedError):
    """A learner-owned function still raises NotImplementedError; the message starts with "M<n>:"."""


# --------------------------------------------------------------------------- the model call

def make_complete(settings=None, usage: Usage | None = None, *, model=None, api_base=None):
    """``complete(messages, tools)`` for agent_loop.run_agent, through LiteLLM.

    Sends the tools with tool_choice="auto" (the model decides; --structured forces emit_answer on
    its final turn by passing ``tool_choice``), caps the answer length, retries
    a rate limit a couple of times, and adds each response's tokens and cost to ``usage``.
    Without ``settings``, loads them (``model``/``api_base`` as on the command line). The
    function carries ``.model`` and ``.usage`` for callers that did not pass their own Usage.
    """
    settings = settings or config.load_settings(model=model, api_base=api_base)
    usage = usage if usage is not None else Usage()

    def complete(messages, tool_schemas, tool_choice="auto"):
        import litellm  # lazy: importing LiteLLM takes seconds, and --context-only never needs it

        litellm.suppress_debug_info = True
        # A forced tool (S3) that a model cannot honour: LiteLLM downgrades it to "auto" instead of
        # raising, and the structured answer is then validated from the plain reply.
        forced = {} if tool_choice == "auto" else {"drop_params": True}
        for attempt in range(RATE_LIMIT_RETRIES + 1):
            try:
                response = litellm.completion(
                    model=settings.model,
                    messages=messages,
                    tools=tool_schemas,
                    tool_choice=tool_choice,
                    max_tokens=MAX_ANSWER_TOKENS,
                    api_base=settings.api_base,
                    api_key=settings.api_key,
                    timeout=REQUEST_TIMEOUT,
                    **forced,
                )
                break
            except litellm.RateLimitError:
                if attempt == RATE_LIMIT_RETRIES:
                    raise
                time.sleep(RATE_LIMIT_WAIT * 2**attempt)
        usage.record(response)
        return response.choices[0].message

    complete.model, complete.usage = settings.model, usage
    return complete


def _cost_of(response) -> float | None:
    if "litellm" not in sys.modules:
        return None
    try:
        return float(sys.modules["litellm"].completion_cost(completion_response=response))
    except Exception:  # models missing from LiteLLM's price map raise: cost unknown, not an error
        return None


def counting(complete, usage: Usage):
    """Wrap ``complete`` so that every model call counts as a step."""

    def counted(messages, tool_schemas, **options):
        usage.steps += 1
        return complete(messages, tool_schemas, **options)  # options: tool_choice, for --structured

    return counted


# --------------------------------------------------------------------------- the run

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


def run(question: str, repo_root=".", *, settings=None, complete=None, max_steps=None, top_k=3,
        use_context=True, embed=None, cache_dir=None, structured=False, edits=None) -> Result:
    """Answer ``question`` about ``repo_root``: select context, run the loop, check the citations.

    ``complete`` replaces LiteLLM (tests pass a scripted model); otherwise ``settings`` (default:
    config.load_settings()) says which model to call. Raises NotDoneYet when a learner-owned
    function is not implemented, ValueError for a bad repository, and LiteLLM's errors as they come.

    Stretch: ``edits`` (a stretch.EditPolicy) offers the edit_file tool (S2); ``structured`` forces
    the final answer through emit_answer and validates it (S3; ``complete`` must then accept
    ``tool_choice=``).
    """
    started = time.perf_counter()
    root = check_repo(repo_root)
    usage = Usage()
    if complete is None:
        settings = settings or config.load_settings()
        complete = make_complete(settings, usage)
    if embed is None and settings is not None and settings.embedding_model:
        embed = context_selector.LiteLLMEmbedder(
            settings.embedding_model, settings.embedding_api_base, settings.embedding_api_key)
    if cache_dir is None:
        cache_dir = settings.cache_dir if settings is not None else config.default_cache_dir()
    snippets = context_selector.select_context(question, root, k=top_k, embed=embed, cache_dir=cache_dir) if use_context else []
    messages = build_messages(question, snippets, edits=edits is not None)
    steps = agent_loop.DEFAULT_MAX_STEPS if max_steps is None else max_steps
    model = counting(complete, usage)
    extra = {} if edits is None else {
        "edit_file": (stretch.EDIT_FILE_SCHEMA, partial(stretch.edit_file_tool, policy=edits))}
    final = None
    try:
        with stretch.extra_tools(model, extra) as offered:  # no extra tools: nothing changes
            answer = agent_loop.run_agent(messages, root, offered, max_steps=steps)
        capped = isinstance(answer, str) and answer.startswith(agent_loop.MAX_STEPS_REACHED)
        if structured and not capped:
            final = stretch.finish_with_emit_answer(messages, root, model, snippets)
            answer = final.answer
        if capped:
            citations = []
        elif final is not None:
            citations = structured_citations(final, root, messages, snippets)
        else:
            citations = check_citations(answer, root, messages, snippets)
    except NotImplementedError as exc:  # a learner-owned function (M1-M4, S1-S3) is still a stub
        raise NotDoneYet(str(exc)) from None
    termination = "max_steps" if capped else "invalid_answer" if final and not final.accepted else "answered"
    return Result(
        question=question, repo=str(root), model=getattr(settings, "model", None) or "scripted",
        answer=answer, termination=termination, messages=messages, snippets=snippets,
        citations=citations, usage=usage, wall_seconds=time.perf_counter() - started,
        structured=final, edits=None if edits is None else edits.log,
    )


def check_repo(repo_root) -> Path:
    root = Path(repo_root).expanduser()
    if not root.is_dir():
        raise ValueError(f"--repo {str(repo_root)!r} is not a directory")
    return root.resolve()


# --------------------------------------------------------------------------- citations

def check_citations(answer: str, repo_root, messages, snippets) -> list[Citation]:
    """Every path:line in the answer, checked: a visible file in the repository (through the
    sandbox), lines that exist, and lines that were injected or shown by a tool in this run.
    A citation that fails any check is ungrounded: the model may have guessed it."""
    seen = lines_seen(messages, snippets)
    citations, done = [], set()
    for match in CITATION.finditer(answer or ""):
        path = match.group(1).removeprefix("./")
        line = int(match.group(2))
        end = max(int(match.group(3) or line), line)
        if (path, line, end) not in done:
            done.add((path, line, end))
            citations.append(_check_one(Citation(path, line, end), repo_root, seen))
    return citations


def _check_one(cite: Citation, repo_root, seen) -> Citation:
    try:
        target = tools.resolve_visible(repo_root, cite.path)
    except (ValueError, tools.ToolError):
        cite.reason = "outside the repository or hidden by the sandbox"
        return cite
    if not target.is_file():
        cite.reason = "no such file in the repository"
        return cite
    cite.exists = True
    total = _count_lines(target)
    cite.in_range = 1 <= cite.line <= cite.end_line <= total
    if not cite.in_range:
        lines = f"line {cite.line} is" if cite.end_line == cite.line else f"lines {cite.line}-{cite.end_line} are"
        cite.reason = f"{lines} outside the file ({total} lines)"
        return cite
    shown = seen.get(tools.display_path(repo_root, target), [])
    cite.seen = any(lo <= cite.end_line and cite.line <= hi for lo, hi in shown)
    if not cite.seen:
        cite.reason = ("these lines were never read or injected in this run" if not shown else
                       "the file was read, but not these lines: " + ", ".join(f"{lo}-{hi}" for lo, hi in shown))
    return cite


def check_span(path: str, start_line: int, end_line: int, repo_root, seen) -> Citation:
    """One cited span (``seen`` from lines_seen), checked exactly like the citations in an answer."""
    return _check_one(Citation(path.removeprefix("./"), start_line, end_line), repo_root, seen)


def structured_citations(final, repo_root, messages, snippets) -> list[Citation]:
    """The well-formed citations of emit_answer's arguments (S3), checked for the report."""
    seen = lines_seen(messages, snippets)
    spans = [(c.get("path"), c.get("start_line"), c.get("end_line")) for c in final.citations if isinstance(c, dict)]
    return [check_span(path, start, end, repo_root, seen) for path, start, end in spans
            if isinstance(path, str) and all(type(n) is int for n in (start, end))]


def _count_lines(path: Path) -> int:
    count, last = 0, b""
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            count += chunk.count(b"\n")
            last = chunk[-1:]
    return count + (1 if last not in (b"", b"\n") else 0)


def lines_seen(messages, snippets) -> dict[str, list[tuple[int, int]]]:
    """path -> line ranges the model was shown: injected snippets, read_file windows, search hits."""
    seen: dict[str, list[tuple[int, int]]] = {}
    for s in snippets:
        seen.setdefault(s.path, []).append((s.start_line, s.end_line))
    for message in messages:
        if message.get("role") != "tool" or str(message.get("content", "")).startswith("Error:"):
            continue
        text = str(message["content"])
        for path, _total, lo, hi in READ_HEADER.findall(text):
            seen.setdefault(path, []).append((int(lo), int(hi)))
        if not READ_HEADER.search(text):
            for path, line in SEARCH_HIT.findall(text):
                seen.setdefault(path, []).append((int(line), int(line)))
    return seen


# --------------------------------------------------------------------------- the transcript

def tool_calls_of(messages) -> list[dict]:
    """Every tool call in the transcript: step, name, arguments (as sent), and whether it errored."""
    results = {m.get("tool_call_id"): str(m.get("content", "")) for m in messages if m.get("role") == "tool"}
    calls, step = [], 0
    for message in messages:
        if message.get("role") == "assistant" and message.get("tool_calls"):
            step += 1
            for call in message["tool_calls"]:
                fn = call.get("function", {})
                calls.append({"step": step, "name": fn.get("name"), "arguments": fn.get("arguments"),
                              "error": results.get(call.get("id"), "").startswith("Error:")})
    return calls


TRACE_NOT_DONE = "--trace is stretch milestone S1: implement stretch.trace_steps; see PROJECT.md"


def trace_or_note(messages):
    """(steps, None) from stretch.trace_steps (S1), or (None, one line saying why there is no trace)."""
    try:
        return stretch.trace_steps(messages), None
    except NotImplementedError:
        return None, TRACE_NOT_DONE
    except Exception as exc:  # a bug in stretch work must not cost the user the answer
        if os.environ.get("COPILOT_DEBUG") == "1":
            raise
        return None, (f"stretch.trace_steps raised {type(exc).__name__}: {_first_line(exc)} "
                      "(COPILOT_DEBUG=1 shows where)")


def format_trace(steps) -> str:
    """stretch.Step objects as text: Thought, then Action and Observation for each call."""
    lines = []
    for step in steps:
        lines.append(f"Step {step.number}")
        if not step.actions:  # only the last answer is the one printed below the trace
            shown = "(printed below)" if step is steps[-1] else _shorten(step.answer or "", TRACE_OBSERVATION_CHARS)
            lines.append(f"  Answer: {shown}")
        elif step.thought:
            lines.append(f"  Thought: {_shorten(step.thought, TRACE_OBSERVATION_CHARS)}")
        for action in step.actions:
            observation = action.observation
            if observation is None:
                observation = "(none: no tool message answered this call)"
            lines.append(f"  Action: {action.tool}({action.arguments})")
            lines.append(f"  Observation: {_shorten(observation, TRACE_OBSERVATION_CHARS)}")
    return "\n".join(lines)


def _shorten(text: str, limit: int) -> str:
    flat = " | ".join(line.strip() for line in text.strip().splitlines() if line.strip())
    return flat if len(flat) <= limit else flat[: limit - 20] + f" ... [{len(flat):,} chars]"


# --------------------------------------------------------------------------- output

def summary_line(result: Result) -> str:
    u = result.usage
    cost = f"${u.cost_usd:.4f}" if u.cost_usd is not None else "cost unknown"
    ended = {"answered": "answered", "invalid_answer": "stopped: the structured answer failed validation"}.get(
        result.termination, f"stopped: {agent_loop.MAX_STEPS_REACHED}")
    return (f"[{u.steps} steps | {len(result.tool_calls)} tool calls | tokens {u.prompt_tokens:,} in / "
            f"{u.completion_tokens:,} out | {cost} | {result.wall_seconds:.1f} s | {ended}]")


def print_report(result: Result, trace: bool = False, out=None) -> None:
    out = out or sys.stdout
    if trace:
        steps, note = trace_or_note(result.messages)
        if steps is not None:
            print(format_trace(steps), end="\n\n", file=out)
        else:
            print(f"copilot: {note}", file=sys.stderr)
    print(result.answer, file=out)
    if result.structured is not None:
        print_structured(result.structured, out)
    if result.citations:
        print("\nCitations:", file=out)
        for c in result.citations:
            where = f"{c.path}:{c.line}" + (f"-{c.end_line}" if c.end_line != c.line else "")
            verdict = "grounded" if c.grounded else f"UNGROUNDED ({c.reason})"
            print(f"  {where}  {verdict}", file=out)
    elif result.termination == "answered":
        print("\nCitations: none (the answer cites no path:line, so nothing backs it)", file=out)
    if result.edits is not None:
        print_edits(result.edits, out)
    print("\n" + summary_line(result), file=out)


def print_structured(final, out) -> None:
    """--structured (S3): how the forced emit_answer turn went, and every problem if it failed."""
    how = "emit_answer" if final.forced else "plain text (the provider did not force emit_answer)"
    tries = f"{final.attempts} attempt" + ("s" if final.attempts != 1 else "")
    if final.accepted:
        print(f"\nStructured answer: accepted ({how}, {tries})", file=out)
        return
    print(f"\nStructured answer: REJECTED after {tries} ({how}):", file=out)
    for problem in final.problems:
        print(f"  - {problem}", file=out)


def print_edits(edits, out) -> None:
    """--allow-edits (S2): what happened to every edit_file call; dry runs and writes show their diff."""
    print("\nEdits:" if edits else "\nEdits: none requested", file=out)
    labels = {"dry_run": "dry run, NOT applied (add --apply to write it)", "applied": "applied"}
    for edit in edits:
        label = labels.get(edit["status"], f"{edit['status']}: {edit['reason']}")
        print(f"  {edit['path']}  {label}", file=out)
        if edit["status"] in labels and edit["diff"]:
            print("".join(f"    {line}" for line in edit["diff"].splitlines(keepends=True)).rstrip(), file=out)


def save_transcript(result: Result, path) -> None:
    data = {**result.to_json(), "messages": result.messages}
    Path(path).write_text(json.dumps(data, indent=1, ensure_ascii=False), encoding="utf-8")


# --------------------------------------------------------------------------- errors as one line

def describe_error(exc: BaseException, settings=None) -> str:
    """One line for stderr that says what went wrong and what to do; never a traceback."""
    if isinstance(exc, NotDoneYet):
        text = str(exc)
        milestone, _, rest = text.partition(":")
        command = "python -m pytest --stretch" if milestone.strip().startswith("S") else "python -m pytest"
        return f"{milestone.strip()} is not done yet: {rest.strip()}. Run `{command}` to see where you are."
    if isinstance(exc, (config.ConfigError, ValueError)):
        return str(exc)
    model = getattr(settings, "model", None) or "the model"
    names = {cls.__name__ for cls in type(exc).__mro__}
    detail = _first_line(exc)
    if "AuthenticationError" in names:
        return f"authentication failed for {model}: check the API key in code/.env ({detail})"
    if "RateLimitError" in names:
        return f"rate limited by the provider of {model} after {RATE_LIMIT_RETRIES} retries: wait a minute or choose another model ({detail})"
    if "ContextWindowExceededError" in names:
        return f"the conversation no longer fits in {model}'s context window: try --top-k 1 or a lower --max-steps"
    if "NotFoundError" in names:
        return f"the provider does not know the model {model}: check COPILOT_MODEL ({detail})"
    if "Timeout" in names:
        return f"{model} did not answer within {REQUEST_TIMEOUT} s ({detail})"
    if names & {"APIConnectionError", "InternalServerError", "ServiceUnavailableError", "APIError"}:
        where = getattr(settings, "api_base", None) or "its provider"
        return f"could not reach {model} at {where}: {detail}"
    if "BadRequestError" in names:
        return f"the provider rejected the request for {model}: {detail}"
    return f"unexpected {type(exc).__name__}: {detail} (set COPILOT_DEBUG=1 to see the traceback)"


def _first_line(exc: BaseException, limit: int = 200) -> str:
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return text if len(text) <= limit else text[:limit] + " ..."


# --------------------------------------------------------------------------- command line

def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="copilot.py", description="Answer a question about a repository by reading it through tools.")
    parser.add_argument("question", help='for example "why does config default to Groq?"')
    parser.add_argument("--repo", default=".", help="the repository to ask about (default: the current directory)")
    parser.add_argument("--model", help="LiteLLM model name, e.g. groq/openai/gpt-oss-20b (default: from code/.env)")
    parser.add_argument("--api-base", help="URL of a local or OpenAI-compatible server (default: COPILOT_API_BASE)")
    parser.add_argument("--max-steps", type=int, default=agent_loop.DEFAULT_MAX_STEPS, help="model calls at most (default: %(default)s)")
    parser.add_argument("--top-k", type=int, default=context_selector.DEFAULT_TOP_FILES, help="files to inject context from (default: %(default)s)")
    parser.add_argument("--no-context", action="store_true", help="inject nothing; the model must find everything with tools")
    parser.add_argument("--context-only", action="store_true", help="print the selected snippets and stop (no model, no key)")
    parser.add_argument("--trace", action="store_true", help="print Thought -> Action -> Observation for every step")
    parser.add_argument("--json", action="store_true", help="print one JSON document on stdout and nothing else")
    parser.add_argument("--save-transcript", metavar="FILE", help="write the whole conversation as JSON")
    stretch_flags = parser.add_argument_group("stretch milestones (stretch.py)")
    stretch_flags.add_argument("--allow-edits", action="store_true",
                               help="S2: offer the edit_file tool; a dry run shows each diff and changes nothing")
    stretch_flags.add_argument("--apply", action="store_true",
                               help="S2: with --allow-edits, write each edit after you confirm it (y/N)")
    stretch_flags.add_argument("--yes", action="store_true",
                               help="S2: with --apply, confirm every edit without asking (needed with --json or without a terminal)")
    stretch_flags.add_argument("--structured", action="store_true",
                               help="S3: force the final answer through the emit_answer tool and validate its citations")
    parser.add_argument("--reference", action="store_true", help="run with the reference solution in rubric/reference/")
    return parser.parse_args(argv)


def main(argv=None, complete=None) -> int:
    """The command line. ``complete`` (tests only) replaces LiteLLM with a scripted model."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    settings = None
    try:
        if args.max_steps < 1 or args.top_k < 0:
            raise ValueError("--max-steps must be 1 or more and --top-k 0 or more")
        root = check_repo(args.repo)
        if args.context_only:
            return context_only(args, root)
        edits = edit_policy(args)
        if complete is None:
            settings = config.load_settings(model=args.model, api_base=args.api_base)
        result = run(args.question, root, settings=settings, complete=complete, max_steps=args.max_steps,
                     top_k=args.top_k, use_context=not args.no_context, structured=args.structured, edits=edits)
    except KeyboardInterrupt:
        return fail("interrupted", args)
    except Exception as exc:  # every way of not running ends as one clear line and exit code 2
        if os.environ.get("COPILOT_DEBUG") == "1":
            raise
        return fail(describe_error(exc, settings), args)
    if args.save_transcript:
        save_transcript(result, args.save_transcript)
    if args.json:
        print(json.dumps(result.to_json(), ensure_ascii=False))
    else:
        print_report(result, trace=args.trace)
    return result.exit_code


def edit_policy(args):
    """--allow-edits / --apply / --yes as a stretch.EditPolicy (S2), or None: edit_file is not offered."""
    if not args.allow_edits:
        if args.apply or args.yes:
            raise ValueError("--apply and --yes need --allow-edits")
        return None
    if args.yes and not args.apply:
        raise ValueError("--yes confirms the edits that --apply writes: use --allow-edits --apply --yes")
    if args.yes:
        confirm = _always_yes
    elif args.json or not _stdin_is_terminal():
        confirm = None  # a prompt into a pipe would hang, or read the next line of data as consent
    else:
        confirm = stretch.ask_on_terminal
    return stretch.EditPolicy(apply=args.apply, confirm=confirm)


def _always_yes(edit) -> bool:
    return True


def _stdin_is_terminal() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (AttributeError, ValueError):  # replaced or closed stdin
        return False


def context_only(args, root: Path) -> int:
    """--context-only: the snippets the model would get, with no model and no key."""
    settings = config.load_settings(need_model=False)
    embed = None
    if settings.embedding_model:
        embed = context_selector.LiteLLMEmbedder(
            settings.embedding_model, settings.embedding_api_base, settings.embedding_api_key)
    snippets = context_selector.select_context(args.question, root, k=args.top_k, embed=embed, cache_dir=settings.cache_dir)
    if args.json:
        print(json.dumps({"question": args.question, "repo": str(root),
                          "context": [asdict(s) for s in snippets]}, ensure_ascii=False))
    elif snippets:
        print(context_selector.render_snippets(snippets))
    else:
        print("(no snippet shares a word with the question)")
    return 0


def fail(message: str, args) -> int:
    print(f"copilot: {message}", file=sys.stderr)
    if args.json:
        print(json.dumps({"error": message, "exit_code": 2}))
    return 2


if __name__ == "__main__":
    sys.exit(main())
