"""Content-addressed cache of LLM calls, so re-runs and ablations skip finished work."""

from __future__ import annotations

from pathlib import Path

from ...core.cache import KVStore, content_key
from ...core.contracts import LLM, LLMError, per_request_options
from .structured import schema_key


def call_key(model: str, messages: list[dict], max_tokens: int, temperature: float, **options) -> str:
    """SHA-256 of the canonical JSON of (model, messages, max_tokens, temperature) and, when
    any is set, the call's other options (``schema``, ``seed``, ``top_p``, ``top_k``,
    ``repeat_penalty``): a call without options keeps the key it had before they existed."""
    set_options = {k: (schema_key(v) if k == "schema" else v) for k, v in sorted(options.items()) if v is not None}
    if set_options:
        return content_key(model, messages, max_tokens, temperature, set_options)
    return content_key(model, messages, max_tokens, temperature)


class CachedLLM:
    """Wraps an LLM; successful replies are stored in ``<cache_dir>/llm.sqlite``.

    Only reproducible calls are cached: greedy ones (``temperature == 0``) and sampled ones
    with a ``seed`` (DoTA's routing votes: the seed is part of the key, so each vote keeps its
    own sample); failures never are, so a
    re-run retries them.
    """

    def __init__(self, llm: LLM, cache_dir: str | Path):
        self.llm = llm
        self.name = llm.name
        self.store = KVStore(cache_dir, "llm")

    @property
    def context_window(self) -> int:
        """The wrapped LLM's window."""
        return self.llm.context_window

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` by the wrapped LLM's counter."""
        return self.llm.count_tokens(text)

    def warm_up(self) -> None:
        """Load the wrapped model now."""
        self.llm.warm_up()

    def set_call_deadline(self, at: float | None) -> None:
        """The wrapped LLM's call deadline (:meth:`preqrag.core.contracts.LLM.set_call_deadline`):
        cache hits are answered regardless; misses reach the wrapped LLM under it."""
        self.llm.set_call_deadline(at)

    @property
    def hits(self) -> int:
        return self.store.hits

    @property
    def misses(self) -> int:
        return self.store.misses

    def chat_many(self, requests: list[list[dict]], *, max_tokens: int,
                  temperature: float = 0.0, **options) -> list[str | LLMError]:
        """As ``LLM.chat_many``; only cache misses reach the wrapped LLM. ``options``
        (``schema``, ``seed``, sampling settings) are passed on and are part of the key; calls
        at ``temperature > 0`` without a ``seed`` are not cached (a fresh sample each time)."""
        if temperature != 0.0 and options.get("seed") is None:
            return self.llm.chat_many(requests, max_tokens=max_tokens, temperature=temperature, **options)
        per = per_request_options(options, len(requests))  # a seed list: each request's own seed in its key
        keys = [call_key(self.name, m, max_tokens, temperature, **o) for m, o in zip(requests, per)]
        results: list[str | LLMError | None] = self.store.get_many(keys)
        todo = [i for i, r in enumerate(results) if r is None]
        if todo:
            if isinstance(options.get("seed"), (list, tuple)):
                options = {**options, "seed": [per[i]["seed"] for i in todo]}
            fresh = self.llm.chat_many([requests[i] for i in todo], max_tokens=max_tokens,
                                       temperature=temperature, **options)
            self.store.put_many([(keys[i], r) for i, r in zip(todo, fresh) if isinstance(r, str)])
            for i, r in zip(todo, fresh):
                results[i] = r
        return results  # type: ignore[return-value]

    def chat(self, messages: list[dict], *, max_tokens: int, temperature: float = 0.0, **options) -> str:
        (r,) = self.chat_many([messages], max_tokens=max_tokens, temperature=temperature, **options)
        if isinstance(r, LLMError):
            raise r
        return r
