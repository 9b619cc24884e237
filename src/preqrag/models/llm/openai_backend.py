"""OpenAI-compatible HTTP backend (vLLM, TGI, Ollama, llama.cpp server, OpenAI, AI71)."""

from __future__ import annotations

import asyncio
import email.utils
import os
import random
import threading
import time
from datetime import datetime, timezone

from ...core.config import LLMConfig
from ...core.contracts import PROGRAMMING_ERRORS, LLMError, OutputSchema, UnsupportedFeature, per_request_options
from ...core.text import approx_tokens
from ...core.timing import model_time
from .structured import CHOICE_WRAP_TOKENS, is_choice, response_format, unwrap_reply


def _refuses_schema(error) -> bool:
    """True when an error reply is about the structured-output request, not the prompt: a
    400/422 whose message names ``response_format``, a JSON schema, a grammar or guided
    decoding, or any status whose message names ``response_format`` (llama-cpp-python's
    server answers 500 to a ``json_schema`` response format it cannot validate)."""
    text = str(getattr(error, "message", "") or error).lower()
    if "response_format" in text:
        return True
    return getattr(error, "status_code", None) in (400, 422) and any(
        w in text for w in ("json_schema", "schema", "grammar", "guided"))


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


def retry_after_seconds(headers, now: datetime | None = None) -> float | None:
    """Seconds a server asks the client to wait, from ``Retry-After`` (RFC 9110 §10.2.3: delay
    seconds or an HTTP date) or ``retry-after-ms`` (OpenAI's), or None when absent or unreadable.

    Args:
        headers: a mapping of response headers (case-insensitive, as httpx's).
        now: the current time for an HTTP date (default: now, UTC).
    """
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        at = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if at.tzinfo is None:
        at = at.replace(tzinfo=timezone.utc)
    return max(0.0, (at - (now or datetime.now(timezone.utc))).total_seconds())


class AdaptiveConcurrency:
    """AIMD limit on requests in flight: additive increase, multiplicative decrease.

    The limit starts at ``maximum`` (``llm.concurrency``); :meth:`congested` halves it (at least
    1) — a 429, a timeout, or a success slower than ``slow_s`` (half the request timeout: the
    next ones risk timing out); :meth:`succeeded` adds 1 up to ``maximum``. Thread-safe; the
    counters (``rate_limited``, ``timeouts``, ``slow``, ``retries``, ``lowest``) are reported by
    :meth:`OpenAICompatibleLLM.stats`.
    """

    def __init__(self, maximum: int, slow_s: float):
        self.maximum = maximum
        self.slow_s = slow_s
        self._limit = float(maximum)
        self._lock = threading.Lock()
        self.rate_limited = self.timeouts = self.slow = self.retries = 0
        self.lowest = maximum

    @property
    def limit(self) -> int:
        """Requests allowed in flight now (1 .. maximum)."""
        return max(1, int(self._limit))

    def succeeded(self, latency_s: float) -> None:
        if latency_s > self.slow_s:
            with self._lock:
                self.slow += 1
            self.congested()
            return
        with self._lock:
            self._limit = min(float(self.maximum), self._limit + 1.0)

    def congested(self) -> None:
        with self._lock:
            self._limit = max(1.0, self._limit / 2.0)
            self.lowest = min(self.lowest, self.limit)


class _Gate:
    """Requests in flight on one event loop, at most ``limiter.limit`` at a time."""

    def __init__(self, limiter: AdaptiveConcurrency):
        self.limiter = limiter
        self.in_flight = 0
        self.cond = asyncio.Condition()

    async def __aenter__(self):
        async with self.cond:
            await self.cond.wait_for(lambda: self.in_flight < self.limiter.limit)
            self.in_flight += 1

    async def __aexit__(self, *exc):
        async with self.cond:
            self.in_flight -= 1
            self.cond.notify_all()


class OpenAICompatibleLLM:
    """Chat completions over HTTP with the official ``openai`` client.

    ``chat_many`` keeps up to ``cfg.concurrency`` requests in flight (asyncio), fewer while the
    server struggles (:class:`AdaptiveConcurrency`: halved on 429, timeouts and slow replies,
    +1 per good reply). Each request has a ``cfg.timeout_s`` timeout and is retried up to
    ``cfg.max_retries`` times on 408/409/429/5xx, connection errors and timeouts: after the
    server's ``Retry-After`` when it sends one (:func:`retry_after_seconds`), else exponential
    backoff (0.5 s × 2^attempt, at most 8 s, jittered). With a call deadline
    (:meth:`set_call_deadline`, set by ``preqrag run --deadline``) no request runs or waits past
    it. The API key is read from the environment variable ``cfg.api_key_env``
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
        self._gates: dict[asyncio.AbstractEventLoop, _Gate] = {}
        self.limiter = AdaptiveConcurrency(cfg.concurrency, slow_s=cfg.timeout_s / 2)
        self._local = threading.local()

    def warm_up(self) -> None:
        """Nothing to load: the server holds the model (the first request opens the connection)."""

    def set_call_deadline(self, at: float | None) -> None:
        """For calls made from this thread: no request runs or waits for a retry past ``at``
        (seconds since the epoch; None: no deadline); its timeout is cut to the time left, and a
        call with no time left fails at once with an LLMError. Per thread, so that a batch that
        the deadline runner stopped waiting for keeps its cut-off in its own worker thread."""
        self._local.deadline = at

    @property
    def call_deadline(self) -> float | None:
        """The calling thread's call deadline (:meth:`set_call_deadline`), or None."""
        return getattr(self._local, "deadline", None)

    def stats(self) -> dict:
        """Adaptive-concurrency counters: ``concurrency`` now, ``lowest`` reached, ``rate_limited``
        (429s), ``timeouts``, ``slow`` replies, ``retries``."""
        lim = self.limiter
        return {"concurrency": lim.limit, "lowest": lim.lowest, "rate_limited": lim.rate_limited,
                "timeouts": lim.timeouts, "slow": lim.slow, "retries": lim.retries}

    @property
    def context_window(self) -> int:
        """The server model's window as configured (``llm.n_ctx``); prompts are fitted to it
        with an approximate token count (no local tokenizer)."""
        return self.cfg.n_ctx

    def count_tokens(self, text: str) -> int:
        """:func:`preqrag.core.text.approx_tokens` (3 characters per token, conservative): the server's
        tokenizer is not available here."""
        return approx_tokens(text)

    def _new_client(self):
        try:
            import openai
        except ImportError as e:  # pragma: no cover
            raise ImportError('the openai backend needs: pip install "openai"') from e
        return openai.AsyncOpenAI(base_url=self.cfg.base_url,
                                  api_key=os.environ.get(self.cfg.api_key_env) or "sk-no-key",
                                  timeout=self.cfg.timeout_s, max_retries=0)  # retries: _one

    def _client(self):
        """The client of the running event loop (created on first use; a client's connection
        pool belongs to the loop it was first used on)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            for dead in [lp for lp in self._clients if lp.is_closed()]:
                del self._clients[dead]  # its loop is gone; so are its connections
                self._gates.pop(dead, None)
            client = self._clients.get(loop)
            if client is None:
                client = self._clients[loop] = self._new_client()
            return client

    def _gate(self) -> _Gate:
        loop = asyncio.get_running_loop()
        with self._lock:
            gate = self._gates.get(loop)
            if gate is None:
                gate = self._gates[loop] = _Gate(self.limiter)
            return gate

    def _loop(self) -> _LoopThread:
        with self._lock:
            if self._runner is None:
                self._runner = _LoopThread(f"preqrag-openai-{id(self):x}")
            return self._runner

    def request_options(self, *, schema: OutputSchema | None = None, seed: int | None = None,
                        top_p: float | None = None, top_k: int | None = None,
                        repeat_penalty: float | None = None) -> dict:
        """The keyword arguments a call adds to ``chat.completions.create``: ``seed`` (0 unless
        given, so a call repeats on servers that honour seeds), ``response_format`` for a schema
        (:func:`preqrag.models.llm.structured.response_format`), ``top_p`` when set here or in
        ``[llm]``, and ``top_k`` / ``repeat_penalty`` in ``extra_body`` when set (not OpenAI
        parameters; vLLM, SGLang and llama.cpp's server read them)."""
        cfg = self.cfg
        opts: dict = {"seed": 0 if seed is None else seed}
        if schema is not None:
            opts["response_format"] = response_format(schema, mode=cfg.structured_output)
        extra = cfg.sampling(top_p=top_p, top_k=top_k, repeat_penalty=repeat_penalty)
        if "top_p" in extra:
            opts["top_p"] = extra.pop("top_p")
        if extra:
            opts["extra_body"] = extra
        return opts

    async def _one(self, client, gate: _Gate, messages, max_tokens, temperature, deadline: float | None,
                   options: dict | None = None, schema: OutputSchema | None = None) -> str:
        import openai

        where = f"openai backend ({self.cfg.base_url})"
        lim = self.limiter
        attempt = 0
        while True:
            timeout = self.cfg.timeout_s
            if deadline is not None:
                timeout = min(timeout, deadline - time.time())
                if timeout <= 0:
                    raise LLMError(f"{where}: call deadline reached")
            wait: float | None = None
            async with gate:
                t = time.monotonic()
                try:
                    resp = await client.chat.completions.create(
                        model=self.cfg.model, messages=messages, max_tokens=max_tokens,
                        temperature=temperature, timeout=timeout, **(options or {"seed": 0}))
                except openai.APITimeoutError as e:
                    lim.timeouts += 1
                    lim.congested()
                    err = e
                except openai.APIConnectionError as e:
                    err = e
                except openai.APIStatusError as e:
                    err = e
                    if schema is not None and _refuses_schema(e):
                        raise UnsupportedFeature(
                            f"{where} refused structured output (response_format "
                            f"{self.cfg.structured_output}): HTTP {e.status_code}: {' '.join(str(e).split())[:400]}. preqrag "
                            "declares a JSON schema for every LLM step whose output it parses; use a server "
                            "that enforces it (vLLM, SGLang, llama.cpp's llama-server, OpenAI), or set "
                            "[llm] structured_output = 'json_object' for llama-cpp-python's server.") from e
                    if e.status_code == 429:
                        lim.rate_limited += 1
                        lim.congested()
                    elif not (e.status_code in (408, 409) or e.status_code >= 500):
                        raise LLMError(f"{where}: {type(e).__name__}: {e}") from e
                    wait = retry_after_seconds(e.response.headers)
                except openai.OpenAIError as e:
                    raise LLMError(f"{where}: {type(e).__name__}: {e}") from e
                else:
                    lim.succeeded(time.monotonic() - t)
                    break
            if attempt >= self.cfg.max_retries:
                raise LLMError(f"{where}: {type(err).__name__}: {err}") from err
            if wait is None:
                wait = min(8.0, 0.5 * 2 ** attempt) * random.uniform(0.75, 1.0)
            if deadline is not None and time.time() + wait >= deadline:
                raise LLMError(f"{where}: {type(err).__name__}: {err} (no retry: the call deadline comes "
                               f"before the {wait:.1f} s wait ends)") from err
            attempt += 1
            lim.retries += 1
            await asyncio.sleep(wait)
        if not resp.choices:
            raise LLMError(f"{where}: empty choices")
        return unwrap_reply(resp.choices[0].message.content or "", schema)

    async def achat_many(self, requests: list[list[dict]], *, max_tokens: int,
                         temperature: float = 0.0, call_deadline: float | None | object = ...,
                         schema: OutputSchema | None = None, **options) -> list[str | LLMError]:
        """Async form of :meth:`chat_many`, on the caller's event loop (with that loop's client).
        ``call_deadline``: as :meth:`set_call_deadline`, for these requests (default: the one set).

        Raises:
            UnsupportedFeature: the server refused ``response_format`` (not a per-request error).
            A programming error (``TypeError`` ...) propagates too; any other exception of a
            request becomes that request's LLMError."""
        deadline = self.call_deadline if call_deadline is ... else call_deadline
        client = self._client()
        gate = self._gate()
        per = [self.request_options(schema=schema, **o) for o in per_request_options(options, len(requests))]
        if is_choice(schema):  # the choice travels wrapped in {"choice": ...}: room for the wrapping
            max_tokens += CHOICE_WRAP_TOKENS
        with model_time("llm"):  # wall time with requests in flight
            out = await asyncio.gather(
                *(self._one(client, gate, m, max_tokens, temperature, deadline, o, schema)
                  for m, o in zip(requests, per)),
                return_exceptions=True)
        results: list[str | LLMError] = []
        for r in out:
            if isinstance(r, PROGRAMMING_ERRORS):
                raise r
            if isinstance(r, BaseException) and not isinstance(r, LLMError):
                r = LLMError(f"openai backend: {type(r).__name__}: {r}")
            results.append(r)
        return results

    def chat_many(self, requests: list[list[dict]], *, max_tokens: int,
                  temperature: float = 0.0, **options) -> list[str | LLMError]:
        """Concurrent requests; a failed one yields its LLMError in place. Runs on the
        backend's own event loop thread, so it may be called from inside a running loop.
        ``options``: ``schema``, ``seed``, ``top_p``, ``top_k``, ``repeat_penalty``
        (:class:`preqrag.core.contracts.LLM`); every request of the call gets the same ones (``seed`` may
        be a list: one per request)."""
        if not requests:
            return []
        # the caller's thread's call deadline (the loop thread has none of its own)
        return self._loop().run(self.achat_many(requests, max_tokens=max_tokens, temperature=temperature,
                                                call_deadline=self.call_deadline, **options))

    def chat(self, messages: list[dict], *, max_tokens: int, temperature: float = 0.0, **options) -> str:
        """One request; raises LLMError after retries."""
        (r,) = self.chat_many([messages], max_tokens=max_tokens, temperature=temperature, **options)
        if isinstance(r, LLMError):
            raise r
        return r

    def close(self) -> None:
        """Close the background loop's client and stop the loop (idempotent). Clients made
        for other loops are dropped (their loops own their connections)."""
        with self._lock:
            runner, self._runner = self._runner, None
            clients, self._clients = self._clients, {}
            self._gates = {}
        if runner is not None:
            client = clients.get(runner.loop)
            if client is not None and runner.loop.is_running():
                try:
                    runner.run(client.close())
                except Exception:  # pragma: no cover - closing is best effort
                    pass
            runner.stop()
