"""The model call: one ``complete(messages, tools)`` through LiteLLM, and every way it can fail
as one line.

    make_complete(settings, usage)   complete(messages, tool_schemas, tool_choice="auto") -> message
    counting(complete, usage)        the same, counting each call as a step
    Usage                            model calls, tokens and dollars of one run
    describe_error(exc, settings)    one line for stderr: what went wrong and what to do

A rate limit is retried RATE_LIMIT_RETRIES times, waiting RATE_LIMIT_WAIT seconds, then doubling.
LiteLLM is imported on the first call (it takes seconds; --context-only never needs it).
Imports config, never copilot.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass

import config

MAX_ANSWER_TOKENS = 1_024       # per model call; Anthropic requires a value and defaults huge
REQUEST_TIMEOUT = 60            # seconds for one model call
RATE_LIMIT_RETRIES = 2          # after that, exit 2 with a clear line
RATE_LIMIT_WAIT = 4.0           # seconds before the first retry; doubles each time


@dataclass
class Usage:
    """What the run cost: model calls, tokens, dollars (None when LiteLLM has no price for the model)."""

    steps: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    model_seconds: float = 0.0      # waiting for the provider (retries included)
    startup_seconds: float = 0.0    # importing LiteLLM on the first call: start-up, not the model

    def record(self, response) -> None:
        usage = getattr(response, "usage", None)
        self.prompt_tokens += getattr(usage, "prompt_tokens", 0) or 0
        self.completion_tokens += getattr(usage, "completion_tokens", 0) or 0
        cost = _cost_of(response)
        if cost is not None:
            self.cost_usd = (self.cost_usd or 0.0) + cost


class NotDoneYet(NotImplementedError):
    """A learner-owned function still raises NotImplementedError; the message starts with "M<n>:"."""


def run_main(main) -> int:
    """Run a command-line ``main()``: a reader that closes the pipe early (``| head -3``) ends it
    quietly, as it ends any Unix tool, instead of with a BrokenPipeError."""
    try:
        code = main()
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's own flush at exit cannot fail again
        return 141  # 128 + SIGPIPE: what a shell reports for a tool stopped by a closed pipe


def first_not_done(raised: str) -> str:
    """The stub message of the EARLIEST milestone whose function is still a stub, which may come
    before the one that raised (run_agent, M4, is called first, but M1-M3 may not be done either)."""
    import ast
    import inspect
    import textwrap

    from harness.milestones import MILESTONES  # the course, in order (lazy: only on this error)

    for milestone in MILESTONES:
        if raised.startswith(f"{milestone.id}:"):
            return raised
        for qualified in milestone.functions:
            module, name = qualified.split(".")
            fn = getattr(sys.modules.get(module), name, None)
            try:
                body = ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0].body
            except (TypeError, OSError, SyntaxError, IndexError, AttributeError):
                continue
            body = body[1:] if body and isinstance(body[0], ast.Expr) else body  # the docstring
            if len(body) == 1 and isinstance(body[0], ast.Raise) and "NotImplementedError" in ast.dump(body[0]):
                try:
                    return ast.literal_eval(body[0].exc.args[0])
                except (AttributeError, IndexError, ValueError):
                    return f"{milestone.id}: {qualified} is not implemented yet"
    return raised


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
        started = time.perf_counter()
        import litellm  # lazy: importing LiteLLM takes seconds, and --context-only never needs it

        asked = time.perf_counter()
        usage.startup_seconds += asked - started

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
        usage.model_seconds += time.perf_counter() - asked
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


# --------------------------------------------------------------------------- errors as one line

CONTEXT_ONLY_NOTE = "(--context-only needs no provider)"  # the end of config.NO_PROVIDER_MESSAGE


def describe_error(exc: BaseException, settings=None, offline: str | None = None) -> str:
    """One line for stderr that says what went wrong and what to do; never a traceback.

    ``offline``: what the calling program can do without a provider, said instead of copilot.py's
    --context-only (evaluate.py and break_and_observe.py have no such flag)."""
    if offline and isinstance(exc, config.ConfigError) and CONTEXT_ONLY_NOTE in str(exc):
        return str(exc).replace(CONTEXT_ONLY_NOTE, f"({offline})")
    if isinstance(exc, NotDoneYet):
        text = str(exc)
        milestone, _, rest = text.partition(":")
        command = "python -m pytest --stretch" if milestone.strip().startswith("S") else "python -m pytest"
        return f"{milestone.strip()} is not done yet: {rest.strip()}. Run `{command}` to see where you are."
    if isinstance(exc, (config.ConfigError, ValueError)):
        return str(exc)
    model = getattr(settings, "model", None) or "the model"
    names = {cls.__name__ for cls in type(exc).__mro__}
    detail = first_line(exc)
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


def first_line(exc: BaseException, limit: int = 200) -> str:
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return text if len(text) <= limit else text[:limit] + " ..."
