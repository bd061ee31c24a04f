"""Local imitations of three native chat APIs, so LiteLLM's real translation code runs offline.

    with AnthropicFake([tool_reply(("read_file", {"path": "shop/models.py"})),
                        text_reply("Item has price: shop/models.py:11")]) as server:
        litellm.completion(model="anthropic/claude-x", api_base=server.base_url, api_key="k", ...)
        server.chat_requests[1]        # the native body LiteLLM sent the second time
        server.rejections              # [] unless a request broke one of the API's rules

Each fake reads the same provider-neutral script as harness/fake_server.py (text_reply,
tool_reply, error_reply, a callable), answers with the shape the provider documents, and refuses
a request the way the provider does (HTTP 400 in its own error format, the reason also appended
to ``server.rejections``). What each one checks, from the providers' API references:

  AnthropicFake  POST /v1/messages (base: the bare host)
                 x-api-key and anthropic-version headers; max_tokens present; roles only user /
                 assistant, starting with user and alternating; no empty text blocks; every
                 tool_use id answered by a tool_result in the very next (user) message, the
                 tool_results first in it, and no tool_result without its tool_use; tool_choice
                 names an offered tool.
  GeminiFake     POST /v1beta/models/<model>:generateContent (base: <host>/v1beta)
                 an API key (x-goog-api-key header or ?key=); roles only user / model; no empty
                 parts list and no empty text part; a functionCall turn comes right after a user
                 turn and is answered by the next user turn with one functionResponse per call
                 (same names); args and response are objects; allowedFunctionNames are declared.
  OllamaFake     POST /api/chat (base: the bare host)
                 stream false; roles system / user / assistant / tool; content a string;
                 tool-call arguments a JSON object (not a string); tools only for models that
                 support them; unknown models are 404.

Both camelCase and snake_case field names are accepted where the provider accepts both
(Gemini's protobuf JSON). Loopback only, standard library only, stopped by ``with`` / stop().
"""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qs, urlsplit

from harness.fake_server import FakeServer

ANTHROPIC_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                         404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
                         500: "api_error", 529: "overloaded_error"}
GEMINI_STATUSES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
                   429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # Anthropic's rule for tool names

# The providers' own wording for the rules most often broken by an agent loop.
GEMINI_EMPTY_TEXT = ("Unable to submit request because it has an empty text parameter. "
                     "Add a value to the parameter and try again.")
GEMINI_CALL_PLACEMENT = ("Please ensure that function call turn comes immediately after a user turn "
                         "or after a function response turn.")
GEMINI_RESPONSE_COUNT = ("Please ensure that the number of function response parts is equal to the number "
                         "of function call parts of the function call turn.")
OLLAMA_STRING_ARGUMENTS = ("json: cannot unmarshal string into Go struct field ChatRequest.messages.tool_calls."
                           "function.arguments of type api.ToolCallFunctionArguments")


def malformed_call_reply(text: str = "Malformed function call: print(default_api.read_file(path='a.py'))") -> dict:
    """GeminiFake only: HTTP 200 with finishReason MALFORMED_FUNCTION_CALL, no content at all
    (what Gemini answers when the model's function call does not parse)."""
    return {"content": text, "finish_reason": "MALFORMED_FUNCTION_CALL"}


class Rejected(Exception):
    """The request breaks a rule of the API: (status, message) of the provider's answer."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def _arguments_object(arguments) -> dict:
    """Native APIs return tool arguments as objects; a script may give a dict or a JSON string."""
    value = json.loads(arguments) if isinstance(arguments, str) else arguments
    if not isinstance(value, dict):
        raise ValueError(f"native fakes script tool arguments as JSON objects, got {arguments!r}")
    return value


def _pick(obj: dict, camel: str, snake: str, default=None):
    return obj.get(camel, obj.get(snake, default)) if isinstance(obj, dict) else default


class NativeFake(FakeServer):
    """Shared by the three fakes: the script, the lifecycle and the records come from FakeServer.

    ``api_key``: when set, a request with another key gets the provider's authentication error.
    """

    route = ""  # the chat endpoint's path (a regex for Gemini)

    def __init__(self, replies=(), delay: float = 0.0, api_key: str | None = None):
        super().__init__(replies, delay=delay)
        self.api_key = api_key
        self.rejections: list[str] = []

    @property
    def chat_requests(self) -> list[dict]:
        return [body for path, body in self.requests if self.is_chat(path)]

    def is_chat(self, path: str) -> bool:
        return urlsplit(path).path == self.route

    def handle(self, method, path, headers, body):
        if method != "POST" or not self.is_chat(path):
            expected = getattr(self.route, "pattern", self.route)
            return self.error(404, f"no route {method} {path} on this fake (expected POST {expected})")
        try:
            self.authenticate(path, headers)
            self.validate(body, path, headers)
        except Rejected as exc:
            with self._lock:
                self.rejections.append(str(exc))
            return self.error(exc.status, str(exc))
        n = len(self.chat_requests) - 1
        reply = self.next_reply(body, n)
        if "status" in reply:
            error = reply["error"]
            return self.error(reply["status"], error["message"], reply.get("headers"), error)
        return 200, self.render(body, reply, n), {}

    # subclasses: the provider's rules, answer and error format
    def authenticate(self, path: str, headers: dict) -> None: ...

    def validate(self, body: dict, path: str, headers: dict) -> None: ...

    def render(self, body: dict, reply: dict, n: int) -> dict:
        raise NotImplementedError

    def error(self, status: int, message: str, headers=None, fields=None):
        raise NotImplementedError


# --------------------------------------------------------------------------- Anthropic

class AnthropicFake(NativeFake):
    """Anthropic's Messages API. LiteLLM: ``anthropic/<model>`` with ``api_base=server.base_url``."""

    route = "/v1/messages"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"  # LiteLLM appends /v1/messages itself

    def authenticate(self, path, headers):
        key = headers.get("x-api-key")
        if not key:
            raise Rejected("x-api-key header is required", 401)
        if self.api_key is not None and key != self.api_key:
            raise Rejected("invalid x-api-key", 401)
        if not headers.get("anthropic-version"):
            raise Rejected("anthropic-version: header is required")

    def validate(self, body, path, headers):
        if not isinstance(body.get("model"), str):
            raise Rejected("model: Field required")
        if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
            raise Rejected("max_tokens: Field required")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise Rejected("messages: Field required")
        system = body.get("system")
        if isinstance(system, list):
            for block in system:
                self._check_text(block, "system")
        tools = self._check_tools(body)
        previous_uses: set[str] = set()
        for i, message in enumerate(messages):
            role = message.get("role") if isinstance(message, dict) else None
            if role not in ("user", "assistant"):
                raise Rejected(f"messages.{i}.role: Input should be 'user' or 'assistant'")
            if i == 0 and role != "user":
                raise Rejected('messages: first message must use the "user" role')
            if i and messages[i - 1].get("role") == role:
                raise Rejected(f'messages: roles must alternate between "user" and "assistant", '
                               f'but found multiple "{role}" roles in a row')
            blocks = self._blocks(message.get("content"), i, last=i == len(messages) - 1 and role == "assistant")
            results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
            uses = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
            if role == "user":
                unexpected = [r for r in results if r not in previous_uses]
                if unexpected:
                    raise Rejected(f"messages.{i}.content: unexpected `tool_use_id` found in `tool_result` blocks: "
                                   f"{', '.join(map(str, unexpected))}. Each `tool_result` block must have a "
                                   "corresponding `tool_use` block in the previous message.")
                kinds = [b.get("type") for b in blocks]
                if results and kinds[: len(results)] != ["tool_result"] * len(results):
                    raise Rejected(f"messages.{i}.content: tool_result blocks must come first in the content, "
                                   "before any text")
            missing = [u for u in previous_uses if u not in results] if role == "user" else list(previous_uses)
            if missing:
                raise Rejected(f"messages.{i - 1}: `tool_use` ids were found without `tool_result` blocks "
                               f"immediately after: {', '.join(sorted(missing))}. Each `tool_use` block must "
                               "have a corresponding `tool_result` block in the next message.")
            if role == "user" and uses or role == "assistant" and results:
                raise Rejected(f"messages.{i}.content: tool_use belongs to assistant messages, tool_result to user messages")
            for block in blocks:
                if block.get("type") == "tool_use":
                    if block.get("name") not in tools or not isinstance(block.get("input"), dict):
                        raise Rejected(f"messages.{i}.content: tool_use needs an offered tool name and an object input")
            previous_uses = set(uses)
        if previous_uses:
            raise Rejected(f"messages.{len(messages) - 1}: `tool_use` ids were found without `tool_result` blocks "
                           f"immediately after: {', '.join(sorted(previous_uses))}.")

    def _blocks(self, content, i: int, last: bool) -> list[dict]:
        if isinstance(content, str):
            if not content.strip() and not last:
                raise Rejected(f"messages.{i}: all messages must have non-empty content except for the "
                               "optional final assistant message")
            return [{"type": "text", "text": content}]
        if not isinstance(content, list) or (not content and not last):
            raise Rejected(f"messages.{i}: all messages must have non-empty content except for the "
                           "optional final assistant message")
        for block in content:
            if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                raise Rejected(f"messages.{i}.content: every block needs a type")
            if block["type"] == "text":
                self._check_text(block, f"messages.{i}.content")
        return content

    @staticmethod
    def _check_text(block, where: str) -> None:
        text = block.get("text") if isinstance(block, dict) else None
        if not isinstance(text, str) or not text:
            raise Rejected(f"{where}: text content blocks must be non-empty")
        if not text.strip():
            raise Rejected(f"{where}: text content blocks must contain non-whitespace text")

    @staticmethod
    def _check_tools(body) -> set[str]:
        names = set()
        for j, tool in enumerate(body.get("tools") or []):
            name = tool.get("name") if isinstance(tool, dict) else None
            if not isinstance(name, str) or not TOOL_NAME.match(name):
                raise Rejected(f"tools.{j}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'")
            if not isinstance(tool.get("input_schema"), dict) or tool["input_schema"].get("type") != "object":
                raise Rejected(f"tools.{j}.input_schema: Input should be an object schema")
            names.add(name)
        choice = body.get("tool_choice")
        if choice is not None:
            if not isinstance(choice, dict) or choice.get("type") not in ("auto", "any", "tool", "none"):
                raise Rejected("tool_choice: Input tag does not match any of the expected tags: 'auto', 'any', 'tool', 'none'")
            if choice["type"] == "tool" and choice.get("name") not in names:
                raise Rejected(f"tool_choice.name: tool {choice.get('name')!r} is not among the tools offered")
            if not names:
                raise Rejected("tool_choice may only be specified while providing tools")
        return names

    def render(self, body, reply, n):
        content = []
        if reply.get("content"):
            content.append({"type": "text", "text": reply["content"]})
        calls = reply.get("tool_calls") or []
        for i, call in enumerate(calls):
            content.append({"type": "tool_use", "id": f"toolu_fake_{n}_{i}", "name": call["name"],
                            "input": _arguments_object(call["arguments"])})
        prompt = len(json.dumps(body.get("messages", []))) // 4
        return {"id": f"msg_fake_{n}", "type": "message", "role": "assistant", "model": body.get("model"),
                "content": content, "stop_reason": reply.get("finish") or ("tool_use" if calls else "end_turn"),
                "stop_sequence": None,
                "usage": {"input_tokens": prompt, "output_tokens": len(json.dumps(content)) // 4}}

    def error(self, status, message, headers=None, fields=None):
        kind = ANTHROPIC_ERROR_TYPES.get(status, "api_error")
        return status, {"type": "error", "error": {"type": kind, "message": message}}, {
            "request-id": "req_fake", **(headers or {})}


# --------------------------------------------------------------------------- Gemini

class GeminiFake(NativeFake):
    """Gemini's generateContent. LiteLLM: ``gemini/<model>`` with ``api_base=server.base_url``."""

    route = re.compile(r"^/v1beta/models/([^/:]+):generateContent$")

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1beta"  # LiteLLM appends /models/<model>:generateContent

    def is_chat(self, path):
        return bool(self.route.match(urlsplit(path).path))

    def authenticate(self, path, headers):
        key = headers.get("x-goog-api-key") or (parse_qs(urlsplit(path).query).get("key") or [None])[0]
        if not key:
            raise Rejected("Method doesn't allow unregistered callers (callers without established identity). "
                           "Please use API Key or other form of API consumer identity to call this API.", 403)
        if self.api_key is not None and key != self.api_key:
            raise Rejected("API key not valid. Please pass a valid API key.")

    def validate(self, body, path, headers):
        contents = body.get("contents")
        if not isinstance(contents, list) or not contents:
            raise Rejected("* GenerateContentRequest.contents: contents is not specified")
        declared = self._check_tools(body)
        system = _pick(body, "systemInstruction", "system_instruction")
        if system is not None:
            for part in _pick(system, "parts", "parts", []) or []:
                self._check_part(part, "system_instruction")
        for i, content in enumerate(contents):
            role = content.get("role") if isinstance(content, dict) else None
            if role not in ("user", "model"):
                raise Rejected("Please use a valid role: user, model.")
            parts = content.get("parts")
            if not isinstance(parts, list) or not parts:
                raise Rejected(f"* GenerateContentRequest.contents[{i}].parts: contents.parts must not be empty.")
            for j, part in enumerate(parts):
                self._check_part(part, f"contents[{i}].parts[{j}]")
            calls = self._calls(content)
            if calls:
                if role != "model" or i == 0 or contents[i - 1].get("role") != "user":
                    raise Rejected(GEMINI_CALL_PLACEMENT)
                answer = contents[i + 1] if i + 1 < len(contents) else None
                answered = self._responses(answer) if answer and answer.get("role") == "user" else []
                if sorted(answered) != sorted(calls):
                    raise Rejected(GEMINI_RESPONSE_COUNT)
                unknown = [name for name in calls if name not in declared]
                if unknown:
                    raise Rejected(f"function {unknown[0]!r} was called but not declared in tools")
            responses = self._responses(content)
            if responses and (role != "user" or i == 0 or not self._calls(contents[i - 1])):
                raise Rejected(GEMINI_RESPONSE_COUNT)

    @staticmethod
    def _check_part(part, where: str) -> None:
        if not isinstance(part, dict):
            raise Rejected(f"* GenerateContentRequest.{where}: a part must be an object")
        data = [k for k in ("text", "inlineData", "inline_data", "functionCall", "function_call", "functionResponse",
                            "function_response", "fileData", "file_data") if k in part]
        if len(data) != 1:
            raise Rejected(f"* GenerateContentRequest.{where}.data: required oneof field 'data' must have one "
                           "initialized field")
        if "text" in part and (not isinstance(part["text"], str) or not part["text"]):
            raise Rejected(GEMINI_EMPTY_TEXT)
        call = _pick(part, "functionCall", "function_call")
        if call is not None and (not isinstance(call.get("name"), str) or not isinstance(call.get("args", {}), dict)):
            raise Rejected(f"* GenerateContentRequest.{where}.function_call: needs a name and object args")
        response = _pick(part, "functionResponse", "function_response")
        if response is not None and (not isinstance(response.get("name"), str)
                                     or not isinstance(response.get("response"), dict)):
            raise Rejected(f"* GenerateContentRequest.{where}.function_response: needs a name and an object response")

    @staticmethod
    def _calls(content) -> list[str]:
        return [_pick(p, "functionCall", "function_call")["name"] for p in content.get("parts") or []
                if isinstance(p, dict) and _pick(p, "functionCall", "function_call") is not None]

    @staticmethod
    def _responses(content) -> list[str]:
        return [_pick(p, "functionResponse", "function_response")["name"] for p in content.get("parts") or []
                if isinstance(p, dict) and _pick(p, "functionResponse", "function_response") is not None]

    @staticmethod
    def _check_tools(body) -> set[str]:
        names = set()
        for tool in body.get("tools") or []:
            for decl in _pick(tool, "functionDeclarations", "function_declarations", []) or []:
                if not isinstance(decl.get("name"), str) or not decl["name"]:
                    raise Rejected("* GenerateContentRequest.tools[0].function_declarations: name is required")
                names.add(decl["name"])
        config = _pick(_pick(body, "toolConfig", "tool_config", {}), "functionCallingConfig", "function_calling_config")
        if config is not None:
            mode = config.get("mode", "AUTO")
            allowed = _pick(config, "allowedFunctionNames", "allowed_function_names")
            if mode not in ("AUTO", "ANY", "NONE", "VALIDATED", "MODE_UNSPECIFIED"):
                raise Rejected(f"Invalid value at 'tool_config.function_calling_config.mode' ({mode!r})")
            if allowed and (mode != "ANY" or any(a not in names for a in allowed)):
                raise Rejected("* GenerateContentRequest.tool_config.function_calling_config.allowed_function_names: "
                               "only allowed with mode ANY, and each must be a declared function")
        return names

    def render(self, body, reply, n):
        if reply.get("finish_reason") == "MALFORMED_FUNCTION_CALL":  # see malformed_call_reply
            return {"candidates": [{"finishReason": "MALFORMED_FUNCTION_CALL", "index": 0,
                                    "finishMessage": reply.get("content") or "Malformed function call"}],
                    "usageMetadata": {"promptTokenCount": 1, "totalTokenCount": 1}, "modelVersion": "fake",
                    "responseId": f"fake-{n}"}
        parts = []
        if reply.get("content"):
            parts.append({"text": reply["content"]})
        for call in reply.get("tool_calls") or []:
            parts.append({"functionCall": {"name": call["name"], "args": _arguments_object(call["arguments"])}})
        prompt = len(json.dumps(body.get("contents", []))) // 4
        completion = len(json.dumps(parts)) // 4
        candidate = {"content": {"parts": parts, "role": "model"}, "finishReason": reply.get("finish") or "STOP", "index": 0}
        if not parts:  # a blocked or cut-off candidate carries no content at all
            del candidate["content"]
        return {"candidates": [candidate],
                "usageMetadata": {"promptTokenCount": prompt, "candidatesTokenCount": completion,
                                  "totalTokenCount": prompt + completion},
                "modelVersion": "fake", "responseId": f"fake-{n}"}

    def error(self, status, message, headers=None, fields=None):
        payload = {"code": status, "message": message, "status": GEMINI_STATUSES.get(status, "UNKNOWN")}
        delay = (fields or {}).get("retry_delay")  # Gemini puts the wait in the body, e.g. "7s"
        if delay:
            payload["details"] = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}]
        return status, {"error": payload}, dict(headers or {})


# --------------------------------------------------------------------------- Ollama

class OllamaFake(NativeFake):
    """Ollama's /api/chat. LiteLLM: ``ollama_chat/<model>`` with ``api_base=server.base_url``.

    ``models``: the names it serves (None: any); ``no_tools``: models that do not support tools.
    """

    route = "/api/chat"

    def __init__(self, replies=(), delay: float = 0.0, models=None, no_tools=()):
        super().__init__(replies, delay=delay)
        self.models = None if models is None else set(models)
        self.no_tools = set(no_tools)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"  # no /v1: LiteLLM appends /api/chat

    def validate(self, body, path, headers):
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise Rejected("model is required")
        if self.models is not None and model not in self.models:
            raise Rejected(f'model "{model}" not found, try pulling it first', 404)
        if body.get("stream") is not False:
            raise Rejected("this fake answers only stream=false (Ollama streams by default)")
        if body.get("tools") and model in self.no_tools:
            raise Rejected(f"registry.ollama.ai/library/{model}:latest does not support tools")
        messages = body.get("messages")
        if not isinstance(messages, list):
            raise Rejected("messages is required")
        for message in messages:
            if not isinstance(message, dict) or message.get("role") not in ("system", "user", "assistant", "tool"):
                raise Rejected(f"invalid role: {message.get('role') if isinstance(message, dict) else message!r}")
            content = message.get("content")
            if content is not None and not isinstance(content, str):
                raise Rejected(f"json: cannot unmarshal {type(content).__name__} into Go struct field "
                               "ChatRequest.messages.content of type string")
            for call in message.get("tool_calls") or []:
                arguments = (call.get("function") or {}).get("arguments")
                if isinstance(arguments, str):
                    raise Rejected(OLLAMA_STRING_ARGUMENTS)
                if not isinstance(arguments, dict):
                    raise Rejected("tool call arguments must be a JSON object")
        for tool in body.get("tools") or []:
            if tool.get("type") != "function" or not (tool.get("function") or {}).get("name"):
                raise Rejected("each tool needs type 'function' and a function name")

    def render(self, body, reply, n):
        message = {"role": "assistant", "content": reply.get("content") or ""}
        if reply.get("tool_calls"):
            message["tool_calls"] = [{"function": {"name": c["name"], "arguments": _arguments_object(c["arguments"])}}
                                     for c in reply["tool_calls"]]
        return {"model": body.get("model"), "created_at": "2025-01-01T00:00:00Z", "message": message,
                "done_reason": reply.get("finish") or "stop", "done": True, "total_duration": 1_000_000, "load_duration": 1_000,
                "prompt_eval_count": len(json.dumps(body.get("messages", []))) // 4, "prompt_eval_duration": 1_000,
                "eval_count": len(json.dumps(message)) // 4, "eval_duration": 1_000}

    def error(self, status, message, headers=None, fields=None):
        return status, {"error": message}, dict(headers or {})
