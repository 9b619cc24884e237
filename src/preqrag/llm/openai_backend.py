"""OpenAI-compatible HTTP backend (vLLM, TGI, Ollama, llama.cpp server, OpenAI, AI71)."""

from __future__ import annotations

import asyncio
import os
import threading

from ..config import LLMConfig
from ..stages import LLMError
from ..timing import model_time


class _LoopThread:
    """One asyncio event loop running forever on a daemon thread.

    :meth:`OpenAICompatibleLLM.chat_many` submits coroutines to it with
    :func:`asyncio.run_coroutine_threadsafe`, so it works from any thread, including one
    that is itself running an event loop (a web server), where ``asyncio.run`` fails.
    """

    def __init__(self, name: str):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coro):
        """Run ``coro`` on the loop and wait for its result (raises what it raises)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=5)
        if not self.loop.is_running() and not self.loop.is_closed():
            self.loop.close()


class OpenAICompatibleLLM:
    """Chat completions over HTTP with the official ``openai`` client.

    ``chat_many`` keeps up to ``cfg.concurrency`` requests in flight (asyncio). Each request
    has a ``cfg.timeout_s`` timeout and is retried up to ``cfg.max_retries`` times with
    exponential backoff on 408/409/429/5xx and connection errors (the openai client's own
    retry logic). The API key is read from the environment variable ``cfg.api_key_env``
    (a placeholder is sent when unset, as local servers ignore it).

    The synchronous methods run on one private event loop in a background thread (started on
    first use) and reuse one ``AsyncOpenAI`` client, hence one connection pool, for the
    object's lifetime: they can be called from any thread, also from inside a running event
    loop, and concurrently from several threads. :meth:`achat_many` awaited on another loop
    uses one client per loop. :meth:`close` releases the loop and the clients.

    Raises (from the methods): LLMError once retries are exhausted.
    """

    def __init__(self, cfg: LLMConfig):
        if not cfg.base_url:
            raise ValueError("llm.base_url is required for the 'openai' backend (e.g. http://127.0.0.1:8000/v1)")
        self.cfg = cfg
        self.name = cfg.model
        self._lock = threading.Lock()
        self._runner: _LoopThread | None = None
        self._clients: dict[asyncio.AbstractEventLoop, object] = {}

    @property
    def context_window(self) -> int:
        """The server model's window as configured (``llm.n_ctx``); prompts are fitted to it
        with an approximate token count (no local tokenizer)."""
        return self.cfg.n_ctx

    def _new_client(self):
        try:
            import openai
        except ImportError as e:  # pragma: no cover
            raise ImportError('the openai backend needs: pip install "openai"') from e
        return openai.AsyncOpenAI(base_url=self.cfg.base_url,
                                  api_key=os.environ.get(self.cfg.api_key_env) or "sk-no-key",
                                  timeout=self.cfg.timeout_s, max_retries=self.cfg.max_retries)

    def _client(self):
        """The client of the running event loop (created on first use; a client's connection
        pool belongs to the loop it was first used on)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            for dead in [lp for lp in self._clients if lp.is_closed()]:
                del self._clients[dead]  # its loop is gone; so are its connections
            client = self._clients.get(loop)
            if client is None:
                client = self._clients[loop] = self._new_client()
            return client

    def _loop(self) -> _LoopThread:
        with self._lock:
            if self._runner is None:
                self._runner = _LoopThread(f"preqrag-openai-{id(self):x}")
            return self._runner

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
        """Async form of :meth:`chat_many`, on the caller's event loop (with that loop's client)."""
        client = self._client()
        sem = asyncio.Semaphore(self.cfg.concurrency)
        with model_time("llm"):  # wall time with requests in flight
            out = await asyncio.gather(
                *(self._one(client, sem, m, max_tokens, temperature) for m in requests),
                return_exceptions=True)
        results: list[str | LLMError] = []
        for r in out:
            if isinstance(r, BaseException) and not isinstance(r, LLMError):
                r = LLMError(f"openai backend: {type(r).__name__}: {r}")
            results.append(r)
        return results

    def chat_many(self, requests: list[list[dict]], *, max_tokens: int,
                  temperature: float = 0.0) -> list[str | LLMError]:
        """Concurrent requests; a failed one yields its LLMError in place. Runs on the
        backend's own event loop thread, so it may be called from inside a running loop."""
        if not requests:
            return []
        return self._loop().run(self.achat_many(requests, max_tokens=max_tokens, temperature=temperature))

    def chat(self, messages: list[dict], *, max_tokens: int, temperature: float = 0.0) -> str:
        """One request; raises LLMError after retries."""
        (r,) = self.chat_many([messages], max_tokens=max_tokens, temperature=temperature)
        if isinstance(r, LLMError):
            raise r
        return r

    def close(self) -> None:
        """Close the background loop's client and stop the loop (idempotent). Clients made
        for other loops are dropped (their loops own their connections)."""
        with self._lock:
            runner, self._runner = self._runner, None
            clients, self._clients = self._clients, {}
        if runner is not None:
            client = clients.get(runner.loop)
            if client is not None and runner.loop.is_running():
                try:
                    runner.run(client.close())
                except Exception:  # pragma: no cover - closing is best effort
                    pass
            runner.stop()
