"""The model call: one ``complete(messages, tools)`` through LiteLLM, and every way it can fail
as one line.

    make_complete(settings, usage)   complete(messages, tool_schemas, tool_choice="auto") -> message
    counting(complete, usage)        the same, counting each call as a step and bounding each reply
    Usage                            model calls, tokens and dollars of one run
    describe_error(exc, settings)    one line for stderr: what went wrong and what to do

    bounded_reply(message)           the reply made safe to run and to send back (counting applies it)

Temporary failures are retried here, and only here (LiteLLM's own retries are switched off):
a rate limit (429) or an overloaded provider (Anthropic's 529, any 503) up to RETRIES times,
waiting what the provider's retry-after asks, within MAX_WAIT seconds; a malformed tool call
(Groq's tool_use_failed, Gemini's MALFORMED_FUNCTION_CALL) or a reply LiteLLM cannot read up to
TOOL_CALL_RETRIES times, at once. LiteLLM is imported on the first call (it takes seconds;
--context-only never needs it), through litellm_guard.import_litellm, and every call is bounded in
wall-clock time by litellm_guard.within_deadline. Imports config, cli and litellm_guard, never copilot.
"""

from __future__ import annotations

import json
import re
import sys
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from types import SimpleNamespace

import config
import local_server
import text_calls
from cli import NotDoneYet, redact_urls, terminal_safe
from litellm_guard import DeadlineExceeded, import_litellm, within_deadline

MAX_ANSWER_TOKENS = 4_096       # per model call (Anthropic requires a value). Reasoning models, the default
                                # gpt-oss among them, spend part of it thinking: a small cap returns empty replies
REQUEST_TIMEOUT = 60            # seconds for one model call, in all (a server dripping bytes is cut off too);
                                # a local server gets LOCAL_TIMEOUT_FACTOR times as long (request_timeout)
RETRIES = 2                     # a rate limit or an overload: retried this often, then one clear line
FIRST_WAIT = 4.0                # seconds before the first retry when the provider names no wait; doubles
MAX_WAIT = 30.0                 # the longest single wait; a provider asking for more gets no retry
TOOL_CALL_RETRIES = 2           # Groq's tool_use_failed is often a one-off: ask again this often

# What each kind of failure is called in the one line (and in tests).
RATE_LIMITED, OVERLOADED, TOOL_CALL_FAILED = "rate_limited", "overloaded", "tool_call_failed"
UNREADABLE = "unreadable_reply"   # HTTP 200, but LiteLLM could not turn the reply into a message
# How LiteLLM words a 200 reply it could not convert (it reports it as an HTTP 500), and why, in our words.
UNREADABLE_MARKS = ("Invalid response object", "Received response - <APIResponse [200")
UNREADABLE_WHY = (
    (re.compile(r"maximum recursion depth", re.I), "its JSON is nested too deeply to decode"),
    (re.compile(r"limit \(\d+ digits\)|integer string conversion", re.I), "it holds a number over 4,300 digits long"),
    (re.compile(r"missing \d+ required positional argument: '(\w+)'"), "a tool call has no {0} member"),
    (re.compile(r"Input should be a valid (\w+)"), "a field that must be a {0} is not, e.g. a tool name sent as a number"),
)
# Anthropic's 529 reaches us as a 500 and Gemini's "model is overloaded" 503 sometimes too: the words tell.
OVERLOAD_WORDS = re.compile(r"\boverloaded", re.IGNORECASE)
# LiteLLM's prefixes in front of the provider's words ("litellm.Timeout: OllamaException: ...").
LITELLM_PREFIX = re.compile(r"^(?:litellm\.\w+:\s*|\w+Error:\s*|\w+Exception\s*[-:]?\s*)+")


@dataclass
class Usage:
    """What the run cost: model calls, tokens, dollars (None when LiteLLM has no price for the model)."""

    steps: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    model_seconds: float = 0.0      # waiting for the provider (retries included)
    startup_seconds: float = 0.0    # importing LiteLLM on the first call: start-up, not the model
    finish_reason: str | None = None  # the last reply's: "stop", "length", "content_filter (SAFETY)"...
    recovered_calls: int = 0        # tool calls a local model wrote as text, recovered (text_calls.py)
    quoted_calls: int = 0           # a local model's replies that quote a call inside other text: kept as text
    answer_cap: int = MAX_ANSWER_TOKENS  # max_tokens of each call (answer_cap: less for a local model)
    scripted: bool = False          # a reply came from the lab's fake server (scripted), not a model

    def record(self, response) -> None:
        from harness.fake_server import SCRIPTED_FINGERPRINT  # the fake server signs its replies

        self.finish_reason = finish_reason_of(response)
        self.scripted |= getattr(response, "system_fingerprint", None) == SCRIPTED_FINGERPRINT
        usage = getattr(response, "usage", None)
        self.prompt_tokens += _tokens(getattr(usage, "prompt_tokens", 0))
        self.completion_tokens += _tokens(getattr(usage, "completion_tokens", 0))
        cost = _cost_of(response)
        if cost is not None:
            self.cost_usd = (self.cost_usd or 0.0) + cost


MAX_TOKENS_COUNTED = 10**12  # a server's token count past this is not believed (two 4,300-digit counts
                             # would add up to a number the summary line could not print)


def _tokens(value) -> int:
    """A token count from a server's reply: a whole number from 0 to MAX_TOKENS_COUNTED, else 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        return 0
    return int(min(value, MAX_TOKENS_COUNTED))


class MalformedToolCall(Exception):
    """Gemini's answer "MALFORMED_FUNCTION_CALL": HTTP 200, but no text and no usable tool call.

    LiteLLM reports it as finish_reason "stop" with empty content, which would read as an empty
    final answer; its native reason is kept in provider_specific_fields.
    """

    body = {"code": "MALFORMED_FUNCTION_CALL", "failed_generation": None}

    def __str__(self) -> str:
        return "the model's tool call was malformed (finish reason MALFORMED_FUNCTION_CALL)"


def native_finish(response) -> str | None:
    """The provider's own finish reason, where LiteLLM keeps it (None if it does not)."""
    try:
        return (response.choices[0].provider_specific_fields or {}).get("native_finish_reason")
    except (AttributeError, IndexError, TypeError):
        return None


def finish_reason_of(response) -> str | None:
    """LiteLLM's finish reason, with the provider's own beside it when that says more."""
    try:
        said = response.choices[0].finish_reason
    except (AttributeError, IndexError, TypeError):
        said = None
    native = native_finish(response)
    if isinstance(native, str) and native.lower() != str(said).lower():
        return f"{said} ({native})"
    return said if isinstance(said, str) else None


def answer_cap(settings) -> int:
    """max_tokens for each call: MAX_ANSWER_TOKENS, or local_server.LOCAL_ANSWER_TOKENS for a model
    served on this machine, so that a reply that runs away still ends within request_timeout."""
    return local_server.LOCAL_ANSWER_TOKENS if local_server.is_local_model(settings) else MAX_ANSWER_TOKENS


def request_timeout(settings) -> float:
    """Seconds one model call may take in all: the settings' ``timeout`` if they carry one, else
    REQUEST_TIMEOUT, or local_server.LOCAL_TIMEOUT_FACTOR times that for a model served on this
    machine (a CPU model needs minutes to read a long prompt). The same number bounds LiteLLM's
    per-read timeout and the wall clock."""
    given = getattr(settings, "timeout", None)
    if given:
        return float(given)
    return float(REQUEST_TIMEOUT * (local_server.LOCAL_TIMEOUT_FACTOR if local_server.is_local_model(settings) else 1))


def make_complete(settings=None, usage: Usage | None = None, *, model=None, api_base=None, sleep=None):
    """``complete(messages, tools)`` for agent_loop.run_agent, through LiteLLM.

    Sends the tools with tool_choice="auto" (the model decides; --structured forces emit_answer on
    its final turn by passing ``tool_choice``), caps the answer length, retries temporary failures
    (see the module docstring; ``sleep(seconds)`` is how it waits, default ``pause``), and adds each
    response's tokens and cost to ``usage``. Without ``settings``, loads them (``model``/``api_base``
    as on the command line). The function carries ``.model``, ``.usage`` and ``.timeout`` (seconds per call).
    """
    settings = settings or config.load_settings(model=model, api_base=api_base)
    usage = usage if usage is not None else Usage()
    timeout = request_timeout(settings)

    usage.answer_cap = answer_cap(settings)

    def complete(messages, tool_schemas, tool_choice="auto", max_tokens=None):
        started = time.perf_counter()
        litellm = import_litellm()  # lazy: it takes seconds, and --context-only never needs it
        asked = time.perf_counter()
        usage.startup_seconds += asked - started

        # A forced tool (S3) that a model cannot honour: LiteLLM downgrades it to "auto" instead of
        # raising, and the structured answer is then validated from the plain reply.
        forced = {} if tool_choice == "auto" else {"drop_params": True}
        waits = tool_retries = 0
        while True:
            try:
                response = within_deadline(
                    litellm.completion, timeout,
                    model=settings.model, messages=wire_messages(settings, messages), tools=tool_schemas,
                    tool_choice=tool_choice,
                    max_tokens=max_tokens or usage.answer_cap, api_base=settings.api_base, api_key=settings.api_key,
                    timeout=timeout, max_retries=0, **forced)
                if native_finish(response) == "MALFORMED_FUNCTION_CALL":
                    raise MalformedToolCall()  # handled below, like Groq's tool_use_failed
                break
            except Exception as exc:
                kind = failure_kind(exc)
                if kind in (TOOL_CALL_FAILED, UNREADABLE) and tool_retries < TOOL_CALL_RETRIES:
                    tool_retries += 1
                    continue
                wait = retry_wait(exc, waits) if kind in (RATE_LIMITED, OVERLOADED) else None
                if wait is None or waits >= RETRIES:
                    exc.copilot_retries = tool_retries if kind in (TOOL_CALL_FAILED, UNREADABLE) else waits
                    exc.copilot_timeout = timeout
                    raise
                waits += 1
                (sleep or pause)(wait)
        usage.model_seconds += time.perf_counter() - asked
        usage.record(response)
        return recover_written_calls(settings, usage, response.choices[0].message, tool_schemas)

    complete.model, complete.usage, complete.timeout = settings.model, usage, timeout
    return complete


def recover_written_calls(settings, usage: Usage, message, tool_schemas):
    """PROVIDED RECOVERY, for a local server only: a reply that is nothing but tool calls written as
    JSON (a small model ignoring its template's tool-call markup) becomes those calls, counted in
    usage.recovered_calls; a call quoted inside other text leaves the reply an answer, counted in
    usage.quoted_calls (the report says so). Hosted providers' replies are returned untouched (see text_calls.py)."""
    if not local_server.is_local_model(settings):
        return message

    def quoted(why):
        usage.quoted_calls += 1

    recovered = text_calls.recover(message, tool_schemas, quoted)
    if recovered is not message:
        usage.recovered_calls += len(recovered.tool_calls)
    return recovered


def wire_messages(settings, messages) -> list:
    """The messages as sent. A tool-calling turn without text has content None, which LiteLLM
    leaves out, and that is right for every hosted provider; but some local OpenAI-compatible
    servers (llama-cpp-python's, for one) answer HTTP 500 to a turn with no content key, so a
    local openai/ or hosted_vllm/ server gets "" there instead. The transcript is not changed."""
    messages = [without_surrogates(m) for m in messages]  # one would fail the request's UTF-8 encoding
    prefix = settings.model.split("/", 1)[0] if "/" in settings.model else "openai"
    if not settings.api_base or prefix not in ("openai", "hosted_vllm"):
        return messages
    return [{**m, "content": ""} if isinstance(m, dict) and m.get("role") == "assistant" and m.get("content") is None
            else m for m in messages]


_SURROGATE = re.compile("[\ud800-\udfff]")


def without_surrogates(value):
    """``value`` (str, dict, list, nesting) with every lone surrogate as U+FFFD: JSON's "\\ud800"
    decodes to one, and no UTF-8 encoder (a request body, a terminal) accepts it."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value) if _SURROGATE.search(value) else value
    if isinstance(value, dict):
        return {without_surrogates(k): without_surrogates(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(without_surrogates(v) for v in value)
    return value


def pause(seconds: float) -> None:
    """How the retries wait (tests replace it, so they never sleep)."""
    time.sleep(seconds)


def _cost_of(response) -> float | None:
    if "litellm" not in sys.modules:
        return None
    try:
        return float(sys.modules["litellm"].completion_cost(completion_response=response))
    except Exception:  # models missing from LiteLLM's price map raise: cost unknown, not an error
        return None


def counting(complete, usage: Usage, watch=None):
    """Wrap ``complete`` so that every model call counts as a step, and every reply is bounded.

    bounded_reply runs before the loop sees the reply: unique string ids, plain tool names, no
    lone surrogates, at most MAX_CALLS_PER_TURN calls run per turn (the others answered with an error).
    ``watch`` (a live.LiveView, or None) is told of each call as it starts, ends or fails: the run
    you can watch on a terminal, seen from here so that your run_agent needs nothing for it.
    """

    def counted(messages, tool_schemas, **options):
        usage.steps += 1
        if watch is None:  # options: tool_choice, for --structured
            return bounded_reply(complete(messages, tool_schemas, **options))
        watch.calling(usage.steps, messages)
        try:
            reply = bounded_reply(complete(messages, tool_schemas, **options))
        except BaseException as exc:
            watch.failed(usage.steps, exc)
            raise
        watch.replied(usage.steps, reply, usage.finish_reason)
        return reply

    return counted


# Budgets per turn, so they hold in total and not only per tool: at most MAX_CALLS_PER_TURN calls
# are run, and agent_loop.tool_result cuts each result at MAX_OBSERVATION_CHARS.
MAX_CALLS_PER_TURN = 12
MAX_ARGUMENT_CHARS = 20_000
_TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")   # what providers accept back as a tool name
_CALL_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")


def bounded_reply(message):
    """The model's message made safe to run and to send back; counting applies it.

    Applied before parse_tool_calls and assistant_turn see the message, so both see the same
    calls: ids become unique non-empty strings (a repeated id would answer two calls with one
    result), a name that is not a short plain string becomes "invalid_tool_name", arguments
    that are not a string are encoded, lone surrogates become U+FFFD (text and arguments), and a
    call past MAX_CALLS_PER_TURN, or with arguments over MAX_ARGUMENT_CHARS, keeps its id but gets
    arguments ``{"_not_run": "<why>"}``: check_arguments returns that text, so it is answered with
    an error and never run.
    """
    from tools import NOT_RUN_KEY, TOOL_FUNCTIONS, shorten  # the implementation chosen by now (code/ or reference)

    raws = list(getattr(message, "tool_calls", None) or [])
    content = getattr(message, "content", None)
    calls, seen = [], set()
    for index, raw in enumerate(raws):
        function = getattr(raw, "function", None)
        call_id = getattr(raw, "id", None)
        if not (isinstance(call_id, str) and _CALL_ID.fullmatch(call_id)) or call_id in seen:
            call_id = f"call_{index}" if f"call_{index}" not in seen else f"call_{index}_{len(seen)}"
        seen.add(call_id)
        name, arguments = getattr(function, "name", None), getattr(function, "arguments", None)
        why = None
        if not (isinstance(name, str) and _TOOL_NAME.fullmatch(name)):
            why = f"the tool name {shorten(name, 60)} is not a tool; the tools are {', '.join(TOOL_FUNCTIONS)}"
            name = "invalid_tool_name"
        if arguments is None:
            arguments = ""
        elif not isinstance(arguments, str):
            try:
                arguments = json.dumps(arguments)
            except (TypeError, ValueError, RecursionError):
                arguments = ""
        if index >= MAX_CALLS_PER_TURN:
            why = (f"not run: this turn asked for {len(raws)} tool calls and at most {MAX_CALLS_PER_TURN} "
                   "are run per turn; ask again for the ones you still need")
        elif len(arguments) > MAX_ARGUMENT_CHARS:
            why = f"not run: the arguments were {len(arguments):,} characters; the limit is {MAX_ARGUMENT_CHARS:,}"
        if why:
            arguments = json.dumps({NOT_RUN_KEY: why})
        calls.append(SimpleNamespace(id=call_id, type="function",
                                     function=SimpleNamespace(name=name, arguments=_no_escaped_surrogates(arguments))))
    text = without_surrogates(content) if isinstance(content, str) else None
    return SimpleNamespace(content=text, tool_calls=calls or None)


_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


def _no_escaped_surrogates(arguments: str) -> str:
    """Arguments whose JSON decodes to no lone surrogate ("\\ud800" alone; a pair is an emoji and
    stays): re-encoded with U+FFFD instead when it would, and left alone when it is not JSON."""
    arguments = without_surrogates(arguments)
    if not _ESCAPED_SURROGATE.search(arguments):
        return arguments
    try:
        decoded = json.loads(arguments)
        cleaned = without_surrogates(decoded)
        return arguments if cleaned == decoded else json.dumps(cleaned, ensure_ascii=False)
    except (ValueError, RecursionError):  # not JSON: parse_tool_calls reports it, nothing is run
        return arguments


# --------------------------------------------------------------------------- reading LiteLLM's errors

def failure_kind(exc: BaseException) -> str | None:
    """What a provider error means, most specific first; None for anything else.

    By status code as well as by class, because LiteLLM's classes differ per provider for the same
    failure (measured with 1.110.2, rubric/checks/test_providers.py): Groq reports 5xx, and a 429
    whose text does not say "rate limit", as BadRequestError; Anthropic's 529 arrives as
    InternalServerError with status 500; and every HTTP error also inherits openai.APIError, so a
    check for APIError alone matches them all.
    """
    names = {cls.__name__ for cls in type(exc).__mro__}
    status = getattr(exc, "status_code", None)
    text = str(exc)
    if error_body(exc).get("code") in ("tool_use_failed", "MALFORMED_FUNCTION_CALL"):
        return TOOL_CALL_FAILED
    if any(mark in text for mark in UNREADABLE_MARKS):
        return UNREADABLE
    if "ContextWindowExceededError" in names:
        return "context_window"
    if "AuthenticationError" in names or status == 401:
        return "authentication"
    if "PermissionDeniedError" in names or status == 403:
        return "permission"
    if "RateLimitError" in names or status == 429:
        return RATE_LIMITED
    if status in (503, 529) or "ServiceUnavailableError" in names or OVERLOAD_WORDS.search(text):
        return OVERLOADED
    if "NotFoundError" in names or status == 404:
        return "not_found"
    if "Timeout" in names or isinstance(exc, DeadlineExceeded):
        return "timeout"
    if status in (400, 422) or status is None and names & {"BadRequestError", "UnprocessableEntityError"}:
        return "rejected"
    if "APIConnectionError" in names or re.search(r"Connection (refused|error)|Errno|Name or service", text):
        return "unreachable"
    if "APIError" in names:
        return "provider_failed"
    return None


def error_body(exc: BaseException) -> dict:
    """The provider's error object: exc.body (openai/ routes) or the JSON inside the message (groq/)."""
    body = getattr(exc, "body", None)
    if not isinstance(body, dict):
        text = str(exc)
        start = text.find("{")
        try:  # raw_decode: some messages go on after the JSON (". Handle with `litellm...`")
            body = json.JSONDecoder().raw_decode(text[start:])[0] if start >= 0 else {}
        except ValueError:
            body = {}
    if not isinstance(body, dict):
        return {}
    inner = body.get("error", body)
    return inner if isinstance(inner, dict) else {"message": inner} if isinstance(inner, str) else {}


def provider_message(exc: BaseException, limit: int = 200) -> str:
    """The provider's own words ("rate limit reached ..."), else the exception's first line."""
    message = error_body(exc).get("message")
    if isinstance(message, str) and message.strip():
        text = " ".join(message.split())
        return text if len(text) <= limit else text[:limit] + " ..."
    return LITELLM_PREFIX.sub("", first_line(exc, limit)) or first_line(exc, limit)


def retry_wait(exc: BaseException, attempt: int) -> float | None:
    """Seconds to wait before retrying: the provider's retry-after (or Gemini's retryDelay) if it
    names one, else FIRST_WAIT doubling. None when the provider asks for more than MAX_WAIT."""
    asked = asked_wait(exc)
    if asked is None:
        return min(FIRST_WAIT * 2**attempt, MAX_WAIT)
    return asked if asked <= MAX_WAIT else None


def asked_wait(exc: BaseException) -> float | None:
    """How long the provider asked us to wait, in seconds, or None if it did not say."""
    headers = getattr(exc, "litellm_response_headers", None) or getattr(getattr(exc, "response", None), "headers", None)
    if headers is not None:
        try:
            if headers.get("retry-after-ms"):
                return max(0.0, float(headers["retry-after-ms"]) / 1000)
            value = headers.get("retry-after")
            if value:
                try:
                    return max(0.0, float(value))
                except ValueError:  # an HTTP date
                    return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError, AttributeError):
            pass
    delay = re.search(r'"retryDelay":\s*"(\d+(?:\.\d+)?)s"', str(exc))  # Gemini says it in the body
    return float(delay.group(1)) if delay else None


# --------------------------------------------------------------------------- errors as one line

CONTEXT_ONLY_NOTE = "(--context-only needs no provider)"  # the end of config.NO_PROVIDER_MESSAGE


def describe_error(exc: BaseException, settings=None, suggest_check=True, offline: str | None = None) -> str:
    """One line for stderr that says what went wrong and what to do; never a traceback.

    ``suggest_check=False`` leaves out the pointer to ``--check`` (for --check's own lines).
    ``offline``: what the calling program can do without a provider, said instead of copilot.py's
    --context-only (evaluate.py and break_and_observe.py have no such flag). The provider's words
    in it are its own: control characters are escaped and URLs lose their user:password@ and keys.
    """
    return terminal_safe(redact_urls(_describe(exc, settings, suggest_check, offline)))


def _describe(exc: BaseException, settings, suggest_check: bool, offline: str | None) -> str:
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
    base = getattr(settings, "api_base", None)
    kind = failure_kind(exc)
    status = getattr(exc, "status_code", None)
    said = provider_message(exc)
    retried = getattr(exc, "copilot_retries", 0)
    check = ", or run `python copilot.py --check`" if suggest_check else ""
    if kind == TOOL_CALL_FAILED:
        body = error_body(exc)
        return tool_call_failed_line(model, body.get("failed_generation"), retried, body.get("code"))
    if kind == UNREADABLE:
        return (f"{model}'s reply could not be read (HTTP 200, but {unreadable_why(exc)}), {retried + 1} times in a row: "
                "the server sent a malformed reply; try again, or choose another model or server")
    if kind == "context_window":
        return f"the conversation no longer fits in {model}'s context window: try --top-k 1 or a lower --max-steps"
    if kind == "authentication":
        return f"authentication failed for {model} (HTTP 401): check its API key in code/.env{check} ({said})"
    if kind == "permission":
        return f"the key works but may not use {model} (HTTP 403): check the key's project and model access ({said})"
    if kind == RATE_LIMITED:
        asked = asked_wait(exc)
        if asked is not None and asked > MAX_WAIT:
            return (f"rate limited by the provider of {model} (HTTP 429): it asks to wait {asked:.0f} s, longer than "
                    f"the {MAX_WAIT:.0f} s the copilot waits; try later or choose another model ({said})")
        return (f"rate limited by the provider of {model} (HTTP 429), still after {retried} retries: "
                f"wait a minute or choose another model ({said})")
    if kind == OVERLOADED:
        said_code = error_body(exc).get("code")  # Gemini repeats the HTTP status in its body
        code = said_code if isinstance(said_code, int) else 529 if "overloaded_error" in str(exc) else status or 503
        return f"{model} is overloaded (HTTP {code}), still after {retried} retries: it is temporary, try again in a minute ({said})"
    if kind == "not_found":
        where = f" and the base URL {base}" if base else ""
        return f"the provider does not know the model {model} (HTTP 404): check COPILOT_MODEL{where}{check} ({said})"
    if kind == "timeout":
        seconds = getattr(exc, "copilot_timeout", None) or REQUEST_TIMEOUT
        return f"{model} did not answer within {seconds:g} s in all ({said})"
    if kind == "rejected":
        if "does not support tools" in said:
            others = " or ".join(m for m in ("ollama_chat/qwen3", "ollama_chat/llama3.1") if m != model)
            return f"{model} does not support tools (HTTP 400): choose a model that calls tools, e.g. {others} ({said})"
        return f"the provider rejected the request for {model} (HTTP {status or 400}): {said}"
    if kind == "unreachable":
        see = " See `python copilot.py --check`." if suggest_check else ""
        return f"could not reach {model} at {base or 'its provider'}: {said} (is the server running?{see})"
    if kind == "provider_failed":
        return f"the provider of {model} failed (HTTP {status or '?'}): {said}; try again later"
    return f"unexpected {type(exc).__name__}: {first_line(exc)} (set COPILOT_DEBUG=1 to see the traceback)"


def unreadable_why(exc: BaseException) -> str:
    """Why LiteLLM could not read a 200 reply, in a few words (never its traceback)."""
    text = str(exc)
    for pattern, words in UNREADABLE_WHY:
        found = pattern.search(text)
        if found:
            return words.format(*(g for g in found.groups() if g) or ("",))
    return "it does not have the shape of a chat completion"


def tool_call_failed_line(model: str, failed_generation, retried: int, code="tool_use_failed") -> str:
    """A malformed tool call that outlasted the retries: quote it, suggest another model."""
    wrote = " ".join(str(failed_generation or "").split())[:160]
    quoted = f": {wrote!r}" if wrote else " (the provider kept none of it)"
    suggested = config.PROVIDER_DEFAULTS[0][1]  # the lab's first choice; public tool_use_failed reports are mostly Llama
    instead = f"COPILOT_MODEL={suggested}" if model != suggested else "another provider's model, e.g. openai/gpt-4.1-mini"
    return (f"{model} wrote a tool call the provider could not parse ({code}), {retried + 1} times in a row{quoted}. "
            f"This model does not call tools reliably: try {instead}")


def first_line(exc: BaseException, limit: int = 200) -> str:
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return text if len(text) <= limit else text[:limit] + " ..."
