"""OpenAI-compatible HTTP backend (vLLM, TGI, Ollama, llama.cpp server, OpenAI, AI71)."""

from __future__ import annotations

import asyncio
import os

from ..config import LLMConfig
from ..stages import LLMError
from ..timing import model_time


class OpenAICompatibleLLM:
    """Chat completions over HTTP with the official ``openai`` client.

    ``chat_many`` keeps up to ``cfg.concurrency`` requests in flight (asyncio). Each request
    has a ``cfg.timeout_s`` timeout and is retried up to ``cfg.max_retries`` times with
    exponential backoff on 408/409/429/5xx and connection errors (the openai client's own
    retry logic). The API key is read from the environment variable ``cfg.api_key_env``
    (a placeholder is sent when unset, as local servers ignore it).

    Raises (from the methods): LLMError once retries are exhausted.
    """

    def __init__(self, cfg: LLMConfig):
        if not cfg.base_url:
            raise ValueError("llm.base_url is required for the 'openai' backend (e.g. http://127.0.0.1:8000/v1)")
        self.cfg = cfg
        self.name = cfg.model

    def _client(self):
        try:
            import openai
        except ImportError as e:  # pragma: no cover
            raise ImportError('the openai backend needs: pip install "openai"') from e
        return openai.AsyncOpenAI(base_url=self.cfg.base_url,
                                  api_key=os.environ.get(self.cfg.api_key_env) or "sk-no-key",
                                  timeout=self.cfg.timeout_s, max_retries=self.cfg.max_retries)

    async def _one(self, client, sem: asyncio.Semaphore, messages, max_tokens, temperature) -> str:
        import openai

        async with sem:
            try:
                resp = await client.chat.completions.create(
                    model=self.cfg.model, messages=messages, max_tokens=max_tokens,
                    temperature=temperature, seed=0)
            except openai.OpenAIError as e:
                raise LLMError(f"openai backend ({self.cfg.base_url}): {type(e).__name__}: {e}") from e
        if not resp.choices:
            raise LLMError(f"openai backend ({self.cfg.base_url}): empty choices")
        return resp.choices[0].message.content or ""

    async def achat_many(self, requests: list[list[dict]], *, max_tokens: int,
                         temperature: float = 0.0) -> list[str | LLMError]:
        """Async form of :meth:`chat_many`."""
        client = self._client()
        sem = asyncio.Semaphore(self.cfg.concurrency)
        try:
            with model_time("llm"):  # wall time with requests in flight
                out = await asyncio.gather(
                    *(self._one(client, sem, m, max_tokens, temperature) for m in requests),
                    return_exceptions=True)
        finally:
            await client.close()
        results: list[str | LLMError] = []
        for r in out:
            if isinstance(r, BaseException) and not isinstance(r, LLMError):
                r = LLMError(f"openai backend: {type(r).__name__}: {r}")
            results.append(r)
        return results

    def chat_many(self, requests: list[list[dict]], *, max_tokens: int,
                  temperature: float = 0.0) -> list[str | LLMError]:
        """Concurrent requests; a failed one yields its LLMError in place."""
        return asyncio.run(self.achat_many(requests, max_tokens=max_tokens, temperature=temperature))

    def chat(self, messages: list[dict], *, max_tokens: int, temperature: float = 0.0) -> str:
        """One request; raises LLMError after retries."""
        (r,) = self.chat_many([messages], max_tokens=max_tokens, temperature=temperature)
        if isinstance(r, LLMError):
            raise r
        return r
