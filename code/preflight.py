"""``python copilot.py --check``: can this setup reach a model that calls tools? Run it before M5.

One line per finding, ``ok``, ``warn`` or ``FAIL``; exit code 0 when nothing failed, else 2.

    ok    model: groq/openai/gpt-oss-120b (default for GROQ_API_KEY, the first provider key found)
    ok    key: GROQ_API_KEY = ...9f2c, 56 characters (from code/.env)
    ok    base URL: the provider's own (COPILOT_API_BASE is not set)
    ok    answer: the model answered (0.8 s)
    ok    tool call: the model called list_directory when a tool call was required

Two tiny requests at most (a few hundred tokens): one that may be answered in any way, one that
requires a tool call. Nothing is read from the repository; the tools are only offered.
"""

from __future__ import annotations

import json
import os
import sys
import time

import config
import context_selector
import llm
import local_server
import text_calls
from cli import json_text, redact_urls, terminal_safe
from tools import TOOL_SCHEMAS

HELLO = [{"role": "user", "content": "Reply with the single word: ready"}]
PROMPT_CHARS = 1_200      # copilot.SYSTEM_PROMPT, the context's frame and a question, roughly
LOCAL_PROBE_TOKENS = 256  # a local server's probes: enough for a call, and a runaway reply stops in seconds
NEEDS_TOOL = [{"role": "user", "content": "Call the list_directory tool with path \".\" now. Do not answer in text."}]


def mask(key: str) -> str:
    """Enough of a key to recognise it, never enough to use it: its last characters only, at most
    four and at most one in eight (a 16-character key shows 2), and its length."""
    shown = min(4, len(key) // 8)
    return f"...{key[-shown:]}, {len(key)} characters" if shown else f"***, {len(key)} characters"


def source_of(name: str, environ=None, settings_file: str = "code/.env") -> str:
    """Where the variable ``name`` was set: a real environment variable wins over the settings file."""
    environ = os.environ if environ is None else environ
    return "the environment" if environ.get(name) else settings_file


def check(model=None, api_base=None, env=None, out=None, sleep=None, env_file=None, json_output=False) -> int:
    """Print the findings to ``out`` (default stdout); return 0 if none failed, else 2.

    ``env`` replaces the environment and .env files (tests); ``env_file`` is --env-file's file;
    ``sleep`` is how retries wait. ``json_output``: one JSON document at the end instead of lines.
    """
    out = out or sys.stdout
    findings: list[dict] = []

    def say(level: str, text: str) -> None:
        text = terminal_safe(redact_urls(text))  # a server's words and URLs: no ESC, no user:KEY@
        findings.append({"level": level, "text": text})
        if not json_output:
            print(f"{level:<5} {text}", file=out)

    try:
        _check(say, model, api_base, env, sleep, env_file)
    finally:
        code = 2 if any(f["level"] == "FAIL" for f in findings) else 0
        if json_output:
            print(json_text({"ready": code == 0, "exit_code": code, "findings": findings}), file=out)
    return code


def _check(say, model, api_base, env, sleep, env_file) -> None:
    """The findings in order, each through ``say(level, text)``; stops at the first FAIL that ends the check."""
    environ = os.environ if env is None else env
    settings_file = str(env_file) if env_file else "code/.env"  # what --env-file named, if anything
    merged = config.read_environment(env_file=env_file) if env is None else env
    try:
        settings = config.load_settings(model=model, api_base=api_base, env=merged)
    except config.ConfigError as exc:
        say("FAIL", f"settings: {exc}")
        return
    say("ok", f"model: {settings.model} ({model_source(model, merged, environ, settings_file)})")
    say(*key_finding(settings, merged, environ, settings_file))
    if settings.api_base:
        say("ok", f"base URL: {settings.api_base} ({'--api-base' if api_base else 'COPILOT_API_BASE, from ' + source_of('COPILOT_API_BASE', environ, settings_file)})")
    else:
        say("ok", "base URL: the provider's own (COPILOT_API_BASE is not set)")
    for problem in config.base_url_problems(settings.model, settings.api_base):
        say("warn", problem)
    local, why = local_server.locality(settings)
    hint = "" if getattr(settings, "local", None) is not None else "; COPILOT_LOCAL=1 or 0 decides otherwise"
    say("ok", f"where: {'a local server' if local else 'a hosted provider'} ({why}{hint})")
    if local:
        say("ok", f"timeout: {llm.request_timeout(settings):g} s per model call (a local server; a hosted provider "
                  f"gets {llm.REQUEST_TIMEOUT} s)")
    probe = {"max_tokens": LOCAL_PROBE_TOKENS} if local else {}  # a runaway reply ends in seconds, not minutes
    usage = llm.Usage()
    complete = llm.make_complete(settings, usage, sleep=sleep)
    llm.import_litellm()  # now, so the time below is the model's, not the import's

    started = time.perf_counter()
    try:
        reply = complete(HELLO, TOOL_SCHEMAS, **probe)
    except Exception as exc:  # every failure is one finding, never a traceback
        say("FAIL", f"answer: {llm.describe_error(exc, settings, suggest_check=False)}")
        return
    if str(getattr(reply, "content", "") or "").strip() or getattr(reply, "tool_calls", None):
        say("ok", f"answer: the model answered ({time.perf_counter() - started:.1f} s)")
    else:  # it works, but a run would end without an answer this way (report.empty_reply_reason)
        reason = usage.finish_reason or "none reported"
        say("warn", f"answer: the model replied with no text (finish reason {reason}); a run that ends like this "
                    "has no answer (exit 1)")
    if local:
        say(*window_finding(settings, usage.prompt_tokens))
    try:
        # "required" for a local server too would be worse: llama-server's grammar for it lets a model
        # that never writes its template's call markup run on to the token cap (issue 22)
        message = complete(NEEDS_TOOL, TOOL_SCHEMAS, tool_choice="auto" if local else "required", **probe)
    except Exception as exc:
        say("FAIL", f"tool call: {llm.describe_error(exc, settings, suggest_check=False)}")
        return
    say(*tool_finding(message))


def window_finding(settings, hello_tokens: int) -> tuple[str, str]:
    """A local server: its context window beside the size of a run's first prompt (estimated from the
    first probe's prompt, which holds the tool schemas, plus the system prompt and the injected context)."""
    first = hello_tokens + (PROMPT_CHARS + context_selector.CONTEXT_CHAR_BUDGET) // local_server.CHARS_PER_TOKEN
    window = local_server.context_window(settings)
    if window is None:
        return "ok", (f"context window: not reported by the server (llama-server reports it at /props, Ollama at /api/show); a run's "
                      f"first prompt is about {first:,} tokens: start the server with a window of at least "
                      f"{first + local_server.ANSWER_ROOM:,}")
    level = "ok" if window >= first + local_server.ANSWER_ROOM else "warn"
    cut = "" if level == "ok" else ": the injected context is cut to fit, and tool results may not fit (start the server with a larger -c)"
    return level, f"context window: {window:,} tokens; a run's first prompt is about {first:,}{cut}"


def model_source(model, merged, environ, settings_file: str = "code/.env") -> str:
    if model:
        return "from --model"
    if merged.get("COPILOT_MODEL"):
        return f"COPILOT_MODEL, from {source_of('COPILOT_MODEL', environ, settings_file)}"
    for key_var, default in config.PROVIDER_DEFAULTS:
        if merged.get(key_var):
            return f"default for {key_var}, the first provider key found"
    return "default"


def key_finding(settings, merged, environ, settings_file: str = "code/.env") -> tuple[str, str]:
    if settings.api_key is None:
        return "ok", "key: none needed (a local server)"
    if settings.api_key == config.PLACEHOLDER_API_KEY and not merged.get("COPILOT_API_KEY"):
        return "ok", f"key: none set; a placeholder is sent to {settings.api_base} (set COPILOT_API_KEY if it needs one)"
    name = next((n for n in ("COPILOT_API_KEY", *key_names(settings.model)) if merged.get(n) == settings.api_key), "the key")
    return "ok", f"key: {name} = {mask(settings.api_key)} (from {source_of(name, environ, settings_file)})"


def key_names(model: str) -> tuple[str, ...]:
    prefix = model.split("/", 1)[0] if "/" in model else "openai"
    return config.KEY_FOR_PREFIX.get(prefix, ())


def tool_finding(message) -> tuple[str, str]:
    calls = getattr(message, "tool_calls", None) or []
    if not calls:
        text = " ".join(str(getattr(message, "content", "") or "").split())[:80]
        return "FAIL", (f"tool call: the model answered in text when a tool call was required ({text!r}): it may not "
                        "support tool calling; choose a model that does (see code/.env.example)")
    names = {schema["function"]["name"] for schema in TOOL_SCHEMAS}
    call = calls[0]
    if str(getattr(call, "id", "")).startswith(text_calls.RECOVERED_ID):
        return "warn", (f"tool call: the model wrote its {call.function.name} call as text, not as a tool call; the "
                        "copilot recovers such calls from a local server (text_calls.py), but this model calls "
                        "tools unreliably")
    try:
        arguments = json.loads(call.function.arguments or "{}")
    except ValueError:
        arguments = None
    if call.function.name not in names or not isinstance(arguments, dict):
        return "FAIL", (f"tool call: the model called {call.function.name!r} with {call.function.arguments!r:.80}, "
                        "not one of the offered tools with JSON-object arguments")
    return "ok", f"tool call: the model called {call.function.name} when a tool call was required"
