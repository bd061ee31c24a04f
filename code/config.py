"""Settings for the copilot: which model answers, where it runs, where caches live.

Everything comes from environment variables, which you normally put in ``code/.env`` (copy
``code/.env.example``). Precedence, strongest first:

    1. a real environment variable (``export GROQ_API_KEY=...`` in your shell)
    2. ``code/.env``, or instead the file passed as ``env_file`` (a command-line flag)
    3. the defaults in this file

Never ``./.env``: a cloned repository must not choose where your key is sent. Nothing is
exported to ``os.environ``; the key travels in ``Settings``.

Which model? ``default_model()`` decides: ``COPILOT_MODEL`` if you set it, otherwise the model
of the FIRST provider in ``PROVIDER_DEFAULTS`` whose key is present. Groq is listed first, so
with several keys configured the copilot defaults to Groq. Nothing configured at all raises
``ConfigError`` with the exact lines to put in ``.env``.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from cli import redact_url

# LiteLLM downloads a model price list when it is imported (a 5 s stall offline). Only the exact
# value "True" switches that off, and it must be set before `import litellm`: this module is
# imported first, so it sets it here. Set it to something else yourself to get fresh prices.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

CODE_DIR = Path(__file__).resolve().parent
ENV_FILE = CODE_DIR / ".env"
ENV_EXAMPLE = CODE_DIR / ".env.example"

# Key variable -> default tool-capable model, in order of preference: the first key found wins.
# Groq is first because its free tier needs no credit card, so a learner can run the whole lab at
# no cost; the others follow as the next most common keys. Model names change: if a provider
# retires one, set COPILOT_MODEL instead of editing this table.
PROVIDER_DEFAULTS: tuple[tuple[str, str], ...] = (
    ("GROQ_API_KEY", "groq/openai/gpt-oss-120b"),
    ("OPENAI_API_KEY", "openai/gpt-4.1-mini"),
    ("ANTHROPIC_API_KEY", "anthropic/claude-haiku-4-5"),
    ("GEMINI_API_KEY", "gemini/gemini-2.5-flash"),
    ("GOOGLE_API_KEY", "gemini/gemini-2.5-flash"),  # Gemini accepts either name
)

# Model prefix -> the key it needs. Used to say "you chose an OpenAI model but have no OpenAI key"
# before a request fails with a provider's less helpful error.
KEY_FOR_PREFIX = {
    "groq": ("GROQ_API_KEY",),
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
}

# Sent as the key to a local OpenAI-compatible server that ignores keys (LiteLLM insists on one).
PLACEHOLDER_API_KEY = "not-needed"

NO_PROVIDER_MESSAGE = (
    "no model provider is configured. Put one line in code/.env (copy code/.env.example): "
    "GROQ_API_KEY=<your key> (Groq's free tier works), or OPENAI_API_KEY=..., "
    "ANTHROPIC_API_KEY=..., GEMINI_API_KEY=...; for a local server put "
    "COPILOT_API_BASE=http://localhost:11434 and COPILOT_MODEL=ollama_chat/<model> "
    "(--context-only needs no provider)"
)


class ConfigError(Exception):
    """The settings cannot work; the message says what to put in .env."""


@dataclass(frozen=True)
class Settings:
    """Everything copilot.py needs to reach a model. ``api_key`` None means "LiteLLM's own lookup"."""

    model: str | None  # None only when loaded with need_model=False (--context-only)
    api_base: str | None
    api_key: str | None
    embedding_model: str | None
    embedding_api_base: str | None
    embedding_api_key: str | None
    cache_dir: Path
    # Models that embed questions and documents differently (see .env.example): text put in front of
    # each, and LiteLLM's input_type for (questions, documents).
    embedding_query_prefix: str = ""
    embedding_document_prefix: str = ""
    embedding_input_types: tuple[str, ...] = ()
    embedding_max_chunks: int | None = None  # EMBEDDING_MAX_CHUNKS: a bigger embedding job is refused
    local: bool | None = None  # COPILOT_LOCAL=1/0: the model runs on this machine (None: decided by
                               # the address COPILOT_API_BASE resolves to, local_server.locality)


def read_environment(dotenv_files=None, environ=None, env_file=None) -> dict[str, str]:
    """Merge the .env files with the real environment; the real environment wins.

    ``dotenv_files`` are listed strongest first (default: code/.env alone; none at all when
    COPILOT_NO_DOTENV=1, which tests use so that your own keys never leak into them).
    ``env_file`` (a file named on the command line) replaces code/.env and must exist. Never the
    current directory's .env. Returns a new dict; ``os.environ`` is not changed.
    """
    from dotenv import dotenv_values  # python-dotenv; imported here so `import config` stays cheap

    environ = os.environ if environ is None else environ
    if env_file is not None:
        if not Path(env_file).is_file():
            raise ConfigError(f"the settings file {str(env_file)[:200]!r} does not exist (or is not a file)")
        dotenv_files = [env_file]
    elif dotenv_files is None:
        skip = environ.get("COPILOT_NO_DOTENV") == "1"
        dotenv_files = [] if skip else [ENV_FILE]
    merged: dict[str, str] = {}
    for path in reversed(list(dotenv_files)):  # weakest first, so stronger files overwrite
        if Path(path).is_file():
            merged.update({k: v for k, v in dotenv_values(path).items() if v is not None})
    merged.update(environ)
    return merged


def default_model(env) -> str:
    """The model to use: COPILOT_MODEL, else the first provider in PROVIDER_DEFAULTS with a key.

    Raises ConfigError when neither is there (a COPILOT_API_BASE alone is not enough: a local
    server serves whatever model you name, so name it).
    """
    if env.get("COPILOT_MODEL"):
        return env["COPILOT_MODEL"]
    for key_var, model in PROVIDER_DEFAULTS:
        if env.get(key_var):
            return model
    if env.get("COPILOT_API_BASE"):
        raise ConfigError(
            "COPILOT_API_BASE is set but COPILOT_MODEL is not: name the model your server runs, "
            "e.g. COPILOT_MODEL=ollama_chat/llama3.1 or COPILOT_MODEL=openai/<model> for an "
            "OpenAI-compatible server"
        )
    raise ConfigError(NO_PROVIDER_MESSAGE)


def api_key_for(model: str, api_base: str | None, env) -> str | None:
    """The key to send with ``model``, or None to let LiteLLM look it up itself.

    A hosted provider without its key is a ConfigError here, not a confusing provider error later.
    """
    if env.get("COPILOT_API_KEY"):
        return env["COPILOT_API_KEY"]
    prefix = model.split("/", 1)[0] if "/" in model else "openai"  # LiteLLM treats bare names as OpenAI
    # Other providers: LiteLLM's convention is <PROVIDER>_API_KEY (MISTRAL_API_KEY, ...). The key is
    # passed explicitly because nothing from code/.env is exported for LiteLLM to find by itself.
    names = KEY_FOR_PREFIX.get(prefix, (f"{prefix.upper().replace('-', '_')}_API_KEY",))
    for name in names:
        if env.get(name):
            return env[name]
    if api_base:
        return PLACEHOLDER_API_KEY  # a local server: most ignore the key, LiteLLM wants one anyway
    if prefix in KEY_FOR_PREFIX:
        raise ConfigError(
            f"the model {model!r} needs {names[0]}, which is not set: put {names[0]}=<your key> "
            "in code/.env, or choose another model with COPILOT_MODEL"
        )
    return None  # e.g. ollama_chat/ with its default local address: no key needed


def default_cache_dir(env=None) -> Path:
    """COPILOT_CACHE_DIR, else the user's cache folder (never inside the repository you ask about)."""
    env = os.environ if env is None else env
    if env.get("COPILOT_CACHE_DIR"):
        return Path(env["COPILOT_CACHE_DIR"]).expanduser()
    if sys.platform == "win32":
        base = Path(env.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        base = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "lesson06-copilot"


def load_settings(model=None, api_base=None, env=None, need_model=True, env_file=None) -> Settings:
    """Build the Settings; command-line values (``model``, ``api_base``) beat the environment.

    ``need_model=False`` (for --context-only) skips choosing a chat model, so no key is needed.

    With ``env`` None, reads code/.env (or ``env_file``) and the real environment (see
    read_environment). Nothing is exported to os.environ: callers pass ``api_key`` on.
    """
    if env is None:
        env = read_environment(env_file=env_file)
    base = api_base or env.get("COPILOT_API_BASE") or None
    chosen = model or (default_model(env) if need_model else env.get("COPILOT_MODEL") or None)
    embedder = env.get("EMBEDDING_MODEL") or None
    embed_base = env.get("EMBEDDING_API_BASE") or base
    return Settings(
        model=chosen,
        api_base=base,
        api_key=api_key_for(chosen, base, env) if chosen else None,
        embedding_model=embedder,
        embedding_api_base=embed_base,
        embedding_api_key=api_key_for(embedder, embed_base, env) if embedder else None,
        cache_dir=default_cache_dir(env),
        embedding_query_prefix=env.get("EMBEDDING_QUERY_PREFIX") or "",
        embedding_document_prefix=env.get("EMBEDDING_DOCUMENT_PREFIX") or "",
        embedding_input_types=input_types(env.get("EMBEDDING_INPUT_TYPES")),
        embedding_max_chunks=whole_number("EMBEDDING_MAX_CHUNKS", env.get("EMBEDDING_MAX_CHUNKS")),
        local=yes_or_no("COPILOT_LOCAL", env.get("COPILOT_LOCAL")),
    )


def base_url_problems(model: str | None, api_base: str | None) -> list[str]:
    """The common wrong forms of COPILOT_API_BASE for ``model``'s provider, one sentence each.

    LiteLLM appends each provider's own path to the base, so a wrong form is not refused here: it
    becomes a misleading 404 ("the provider does not know the model") at the first request.
    """
    prefix = model.split("/", 1)[0] if model and "/" in model else ""
    problems = []
    if prefix == "ollama":
        problems.append("ollama/ puts the tools into the prompt and returns raw JSON as the answer: use "
                        "ollama_chat/<model>, which sends real tool calls to Ollama's /api/chat")
    path = urlsplit(api_base).path.rstrip("/") if api_base else None
    if path is None:
        return problems
    if prefix == "anthropic" and path.endswith(("/v1", "/v1/messages")):
        problems.append(f"Anthropic's base URL is the bare host, e.g. https://api.anthropic.com (LiteLLM adds "
                        f"/v1/messages, so {redact_url(api_base)} asks for .../v1/v1/messages)")
    elif prefix == "gemini" and not path.endswith("/v1beta"):
        problems.append("Gemini's base URL ends in /v1beta, e.g. https://generativelanguage.googleapis.com/v1beta "
                        "(LiteLLM adds /models/<model>:generateContent)")
    elif prefix in ("ollama", "ollama_chat") and path.endswith(("/v1", "/api", "/api/chat")):
        problems.append("Ollama's base URL is the bare host, e.g. http://localhost:11434, with no /v1 or /api "
                        "(LiteLLM adds /api/chat)")
    elif prefix in ("openai", "hosted_vllm", "") and not path.endswith("/v1"):
        problems.append("an OpenAI-compatible base URL usually ends in /v1, e.g. http://localhost:8000/v1 "
                        "(LiteLLM adds /chat/completions)")
    elif prefix == "groq" and (not path.endswith("/v1") or "groq.com" in api_base and path != "/openai/v1"):
        problems.append("Groq's base URL is https://api.groq.com/openai/v1; leave COPILOT_API_BASE unset for Groq")
    return problems


def whole_number(name: str, value: str | None) -> int | None:
    """A positive whole number setting, or None when unset."""
    if not value:
        return None
    if not value.strip().isdigit() or len(value.strip()) > 9 or int(value) < 1:
        raise ConfigError(f"{name} must be a whole number of 1 or more, got {value[:40]!r}")
    return int(value)


def yes_or_no(name: str, value: str | None) -> bool | None:
    """1/0 (or true/false, yes/no) as a bool; None when unset."""
    if not value or not value.strip():
        return None
    word = value.strip().lower()
    if word in ("1", "true", "yes", "on"):
        return True
    if word in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name} must be 1 or 0, got {value[:40]!r}")


def input_types(value: str | None) -> tuple[str, ...]:
    """EMBEDDING_INPUT_TYPES=search_query,search_document -> ("search_query", "search_document")."""
    if not value:
        return ()
    names = tuple(name.strip() for name in value.split(","))
    if len(names) != 2 or not all(names):
        raise ConfigError(f"EMBEDDING_INPUT_TYPES must be two names, for questions then documents "
                          f"(e.g. search_query,search_document), got {value!r}")
    return names
