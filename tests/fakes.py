"""Fakes shared by a unit test file and its integration part: scripted LLMs (the step's prompt
building and parsing under test, not an LLM), and an HTTP helper that returns errors instead of
raising them. Importable from every tier (``pythonpath = ["tests"]``)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from preqrag.core.contracts import LLMError
from preqrag.core.text import approx_tokens


class FakeLLMBase:
    """The members of :class:`preqrag.core.contracts.LLM` a scripted LLM has nothing to do for:
    no model to load, no call to cut at a deadline, a 4,096-token window and the conservative
    token count (:func:`preqrag.core.text.approx_tokens`) of a backend without a tokenizer."""

    context_window = 4096

    def count_tokens(self, text: str) -> int:
        return approx_tokens(text)

    def warm_up(self) -> None:
        pass

    def set_call_deadline(self, at) -> None:
        pass


class HandlerLLM(FakeLLMBase):
    """A fake LLM: ``handlers`` maps a system prompt to ``f(user_text) -> reply | LLMError``;
    records every request as ``(system, user, max_tokens)`` in ``calls``."""

    name = "scripted"

    def __init__(self, handlers):
        self.handlers = handlers
        self.calls: list[tuple[str, str, int]] = []

    def chat(self, messages, *, max_tokens, temperature=0.0, **options):
        r = self.chat_many([messages], max_tokens=max_tokens)[0]
        if isinstance(r, LLMError):
            raise r
        return r

    def chat_many(self, requests, *, max_tokens, temperature=0.0, **options):
        out = []
        for msgs in requests:
            system = msgs[0]["content"] if msgs[0]["role"] == "system" else ""
            user = msgs[-1]["content"]
            self.calls.append((system, user, max_tokens))
            out.append(self.handlers.get(system, lambda u: "")(user))
        return out


def server_down(_):
    """A :class:`HandlerLLM` handler whose call fails."""
    return LLMError("server down")


class ReplyLLM(FakeLLMBase):
    """A fake LLM: ``reply(messages, temperature, seed)`` gives each reply; records each call's
    options in ``calls``."""

    name = "fake"

    def __init__(self, reply):
        self.reply = reply
        self.calls: list[dict] = []

    def chat_many(self, requests, *, max_tokens, temperature=0.0, seed=None, schema=None, **options):
        self.calls.append({"n": len(requests), "temperature": temperature, "seed": seed, "max_tokens": max_tokens,
                           "schema": schema, **options})
        seeds = seed if isinstance(seed, list) else [seed] * len(requests)
        return [self.reply(m, temperature, s) for m, s in zip(requests, seeds)]


def is_route(messages) -> bool:
    """A DoTA-RAG routing request (its prompt starts with ``Q: ``)."""
    return messages[-1]["content"].startswith("Q: ")


def vote(*names) -> str:
    """A structured DoTA-RAG routing vote (the JSON the schema allows)."""
    return json.dumps({"about": "the question", "namespaces": list(names)})


def rewritten(text) -> str:
    """A structured DoTA-RAG rewrite reply."""
    return json.dumps({"rewritten": text})


class QueuedLLM(FakeLLMBase):
    """Returns the queued replies in order (an LLMError item is returned in place); records prompts."""

    name = "fake"

    def __init__(self, replies):
        self.replies = list(replies)
        self.prompts: list[str] = []

    def chat(self, messages, *, max_tokens, temperature=0.0, **options):
        raise AssertionError("chat_many expected")

    def chat_many(self, requests, *, max_tokens, temperature=0.0, **options):
        self.prompts += [r[0]["content"] for r in requests]
        return [self.replies.pop(0) for _ in requests]


class PromptRecorder(FakeLLMBase):
    """Records the prompts sent and answers each with a fixed reply; the generator's prompt
    building is under test, not an LLM."""

    def __init__(self, reply: str = "Kaki, a persimmon glaze."):
        self.reply = reply
        self.prompts: list[str] = []

    def chat_many(self, requests, *, max_tokens, **options):
        self.prompts += [r[0]["content"] for r in requests]
        return [self.reply for _ in requests]


def chat_completion(model: str, content: str) -> bytes:
    """The JSON body of an OpenAI chat-completions reply whose one choice says ``content``."""
    return json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": model,
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": content}}],
                       "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()


def send_json(handler, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
    """Answer a ``BaseHTTPRequestHandler`` request with ``status``, ``headers`` and a JSON ``body``."""
    handler.send_response(status)
    for k, v in (headers or {}).items():
        handler.send_header(k, v)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def http(method: str, url: str, body=None, *, raw: bytes | None = None, headers: dict | None = None,
         timeout: float = 900.0) -> tuple[int, dict | None, dict]:
    """(status, JSON body or None, headers) of one request; HTTP errors are returned, not raised."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status, payload, hdrs = resp.status, resp.read(), dict(resp.headers)
    except urllib.error.HTTPError as e:
        status, payload, hdrs = e.code, e.read(), dict(e.headers)
    try:
        parsed = json.loads(payload) if payload else None
    except json.JSONDecodeError:
        parsed = None
    return status, parsed, {k.lower(): v for k, v in hdrs.items()}
