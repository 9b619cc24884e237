"""In-process GGUF inference with llama-cpp-python (the default LLM backend)."""

from __future__ import annotations

import os
import threading

from ...core.config import LLMConfig
from ..files import resolve
from ...core.contracts import PROGRAMMING_ERRORS, LLMError, OutputSchema, chat_each, per_request_options
from ..threads import cpu_threads
from ...core.timing import model_time
from .structured import grammar_text, schema_key


class LlamaCppLLM:
    """A chat model run in-process by llama-cpp-python.

    Greedy decoding at ``temperature == 0`` (PreQRAG §2.5 / Appendix B.2: non-sampling
    decoding gave the best answers). ``flash_attn=True`` was the fastest setting for
    SmolLM2 on this 2-core CPU (~324 tok/s prefill, ~80 tok/s decode).

    Args:
        cfg: ``model`` is a model name (:mod:`preqrag.models.files`), a ``.gguf`` path, or ``"repo_id:filename"``
            on the Hugging Face hub (downloaded by llama-cpp-python; needs internet).
    """

    def __init__(self, cfg: LLMConfig):
        self.cfg = cfg
        self.name = cfg.model
        self._llm = None
        self._lock = threading.Lock()  # a llama.cpp context is not thread-safe
        self._grammars: dict[str, object] = {}
        self._batcher = None  # the BatchDecoder, built on the first batched call
        self._formatter = None
        self._local = threading.local()

    def warm_up(self) -> None:
        """Load the model now (else it loads on first use)."""
        self._load()

    def _load(self):
        with self._lock:  # two threads must not both build a model
            if self._llm is None:
                from .llama_build import load_backends

                load_backends()  # a portable build: register the CPU variant for this CPU
                try:
                    from llama_cpp import Llama
                except ImportError as e:  # pragma: no cover - depends on the install
                    raise ImportError("llama-cpp-python is needed: run ./install.sh (a portable build of "
                                      "llama-cpp-python==0.3.36)") from e
                model = resolve(self.cfg.model)
                kwargs = dict(n_ctx=self.cfg.n_ctx, n_threads=self.cfg.n_threads or cpu_threads(),
                              flash_attn=True, verbose=False, seed=0)
                if model.format == "gguf":
                    self._llm = Llama(model_path=model.location, **kwargs)
                else:
                    repo_id, _, filename = self.cfg.model.partition(":")
                    self._llm = Llama.from_pretrained(repo_id=repo_id, filename=filename or "*Q4_K_M.gguf",
                                                      **kwargs)
        return self._llm

    @property
    def context_window(self) -> int:
        """Tokens the context holds (``llm.n_ctx``): prompt plus generated tokens."""
        return self.cfg.n_ctx

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` in the model's tokenizer (used to fit prompts to the window)."""
        llm = self._load()
        with self._lock:
            return len(llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def _grammar(self, schema: OutputSchema | None):
        """The compiled ``LlamaGrammar`` of ``schema`` (cached per schema), or None."""
        if schema is None:
            return None
        key = schema_key(schema)
        grammar = self._grammars.get(key)
        if grammar is None:
            from llama_cpp import LlamaGrammar

            grammar = LlamaGrammar.from_string(grammar_text(schema), verbose=False)
            self._grammars[key] = grammar
        return grammar

    def chat(self, messages: list[dict], *, max_tokens: int, temperature: float = 0.0,
             schema: OutputSchema | None = None, seed: int | None = None, top_p: float | None = None,
             top_k: int | None = None, repeat_penalty: float | None = None) -> str:
        """One chat completion; raises LLMError when llama.cpp fails (e.g. context overflow).

        ``schema``: the reply is constrained by its grammar (:mod:`preqrag.models.llm.structured`).
        ``seed``: the sampling seed at ``temperature > 0`` (default 0, so a call repeats); pass
        different seeds for different samples (DoTA-RAG's routing votes). ``top_p``, ``top_k``,
        ``repeat_penalty``: this call's sampling settings (None: ``[llm]``'s, else llama.cpp's
        defaults top_p 0.95, top_k 40, repeat_penalty 1.0)."""
        llm = self._load()
        sampling = self.cfg.sampling(top_p=top_p, top_k=top_k, repeat_penalty=repeat_penalty)
        if self.cfg.min_p is not None:
            sampling["min_p"] = self.cfg.min_p
        with self._lock:
            grammar = self._grammar(schema)
            try:
                with model_time("llm"):
                    out = llm.create_chat_completion(messages=messages, max_tokens=max_tokens,
                                                     temperature=temperature, seed=0 if seed is None else seed,
                                                     grammar=grammar, **sampling)
            except PROGRAMMING_ERRORS:
                raise
            except Exception as e:  # llama.cpp raises ValueError/RuntimeError
                raise LLMError(f"llama-cpp: {type(e).__name__}: {e}") from e
        return out["choices"][0]["message"]["content"] or ""

    def set_call_deadline(self, at: float | None) -> None:
        """For batched calls made from this thread: sequences still decoding at ``at`` (epoch
        seconds; None: no deadline) end with an LLMError, the others keep their replies
        (``preqrag run --deadline`` sets the batch's cut-off)."""
        self._local.deadline = at

    def _batch_engine(self):
        """The :class:`~preqrag.models.llm.batching.BatchDecoder` of this model (built once), or None
        when ``n_parallel`` is 1 or the model's chat format is not its GGUF template."""
        if self.cfg.n_parallel <= 1:
            return None
        llm = self._load()
        if self._batcher is None and self._formatter is None:
            from .batching import BatchDecoder, chat_formatter

            self._formatter = chat_formatter(llm) or False
            if self._formatter:
                self._batcher = BatchDecoder(llm, n_parallel=self.cfg.n_parallel,
                                             n_ctx=min(self.cfg.parallel_ctx, self.cfg.n_ctx),
                                             n_threads=self.cfg.n_threads or cpu_threads())
        return self._batcher

    def chat_many(self, requests: list[list[dict]], *, max_tokens: int, temperature: float = 0.0,
                  **options) -> list[str | LLMError]:
        """Every request's reply; a failure is returned in place, not raised. ``options``
        (``schema``, ``seed``, ``top_p``, ``top_k``, ``repeat_penalty``) as in :meth:`chat`,
        for every request (``seed`` may be a list, one per request; requests with the same
        prompt then prefill it once).

        With ``[llm] n_parallel`` > 1 (the default) and two or more requests, the replies are
        decoded together, up to ``n_parallel`` at a time, by continuous batching
        (:class:`~preqrag.models.llm.batching.BatchDecoder`): the same prompts, sampler chains and
        grammars as :meth:`chat`, a higher decode rate. A request whose prompt plus
        ``max_tokens`` exceeds a batch slot (``[llm] parallel_ctx`` tokens) runs alone afterwards
        with the whole ``n_ctx`` window. Greedy replies may differ from
        the sequential ones in a few tokens (batched matrix kernels round differently).
        ``last_batch`` then holds the call's counters. Otherwise the requests run one after
        another through :meth:`chat`."""
        if len(requests) < 2 or self._batch_engine() is None:
            return chat_each(self, requests, max_tokens=max_tokens, temperature=temperature, **options)
        from .batching import Job

        schema = options.pop("schema", None)
        seeds = [o.get("seed") for o in per_request_options(options, len(requests))]
        options.pop("seed", None)
        sampling = self.cfg.sampling(**options)
        if self.cfg.min_p is not None:
            sampling["min_p"] = self.cfg.min_p
        with self._lock:
            grammar = self._grammar(schema)
            jobs, results, alone = [], [], []
            for i, messages in enumerate(requests):
                try:
                    tokens, stop = self._formatter(messages)
                except PROGRAMMING_ERRORS:
                    raise
                except Exception as e:  # a template that refuses the messages
                    results.append(LLMError(f"llama-cpp: chat template: {type(e).__name__}: {e}"))
                    continue
                if len(tokens) + max_tokens > self._batcher.n_ctx:  # too long for a slot: the full window
                    alone.append(i)
                    results.append(None)
                    continue
                results.append(len(jobs))
                jobs.append(Job(tokens, max_tokens, temperature=temperature, seed=seeds[i] or 0,
                                grammar=grammar, sampling=sampling, stop=stop))
            with model_time("llm"):
                out = self._batcher.run(jobs, deadline=getattr(self._local, "deadline", None)) if jobs else []
        replies = [r if not isinstance(r, int) else out[r] if isinstance(out[r], LLMError)
                   else self._batcher.text(out[r], jobs[r].stop) for r in results]
        if alone:  # one at a time, each with the whole n_ctx window
            rest = chat_each(self, [requests[i] for i in alone], max_tokens=max_tokens, temperature=temperature,
                             schema=schema, seed=[seeds[i] or 0 for i in alone], **options)
            for i, r in zip(alone, rest):
                replies[i] = r
        return replies

    @property
    def last_batch(self):
        """Counters of the last batched :meth:`chat_many` (:class:`~preqrag.models.llm.batching.BatchStats`),
        or None before the first."""
        return self._batcher.last if self._batcher is not None else None


def requantize(src: str | os.PathLike, dst: str | os.PathLike, ftype: str = "Q4_0", *, threads: int = 2,
               quiet: bool = False) -> None:
    """Write ``src`` (a GGUF file, quantized or not) requantized to ``ftype`` at ``dst`` with
    llama.cpp's own ``llama_model_quantize`` (``allow_requantize``: a second lossy rounding when
    ``src`` is already quantized; deterministic). Written to ``<dst>.<pid>.partial`` and renamed,
    so a reader sees the whole file or none.

    Q4_0 is the type llama.cpp repacks for its AVX2/AVX-512 matrix kernels: the tests' SmolLM2
    (Q4_1 as shipped) prefills 2.2× faster with it on 2 AVX2 cores (tests/conftest.py).

    Args:
        ftype: a ``LLAMA_FTYPE_MOSTLY_<ftype>`` name of llama-cpp-python (``Q4_0``, ``Q8_0``, ...).
        threads: quantizer threads.
        quiet: keep llama.cpp's per-tensor log (written to file descriptor 2) out of the output.

    Raises:
        AttributeError: an unknown ``ftype``.
        RuntimeError: the quantizer failed (its return code); nothing is left at ``dst``.
    """
    import ctypes

    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{ftype.upper()}")
    params.allow_requantize, params.nthread = True, threads
    tmp = f"{os.fspath(dst)}.{os.getpid()}.partial"
    saved = os.dup(2) if quiet else None
    try:
        if saved is not None:
            with open(os.devnull, "w") as devnull:
                os.dup2(devnull.fileno(), 2)
        rc = llama_cpp.llama_model_quantize(os.fsencode(src), os.fsencode(tmp), ctypes.byref(params))
    finally:
        if saved is not None:
            os.dup2(saved, 2)
            os.close(saved)
    if rc != 0:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise RuntimeError(f"llama_model_quantize returned {rc} on {src}")
    os.replace(tmp, dst)
