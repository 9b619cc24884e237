"""In-process GGUF inference with llama-cpp-python (the default LLM backend)."""

from __future__ import annotations

import os
import threading

from ..config import LLMConfig
from ..registry import resolve
from ..stages import LLMError, chat_each
from ..timing import model_time


class LlamaCppLLM:
    """A chat model run in-process by llama-cpp-python.

    Greedy decoding at ``temperature == 0`` (PreQRAG §2.5 / Appendix B.2: non-sampling
    decoding gave the best answers). ``flash_attn=True`` was the fastest setting for
    SmolLM2 on this 2-core CPU (~324 tok/s prefill, ~80 tok/s decode).

    Args:
        cfg: ``model`` is a registry name, a ``.gguf`` path, or ``"repo_id:filename"``
            on the Hugging Face hub (downloaded by llama-cpp-python; needs internet).
    """

    def __init__(self, cfg: LLMConfig):
        self.cfg = cfg
        self.name = cfg.model
        self._llm = None
        self._lock = threading.Lock()  # a llama.cpp context is not thread-safe

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
                kwargs = dict(n_ctx=self.cfg.n_ctx, n_threads=self.cfg.n_threads or os.cpu_count(),
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

    def chat(self, messages: list[dict], *, max_tokens: int, temperature: float = 0.0,
             seed: int | None = None) -> str:
        """One chat completion; raises LLMError when llama.cpp fails (e.g. context overflow).

        ``seed``: the sampling seed at ``temperature > 0`` (default 0, so a call repeats); pass
        different seeds for different samples (DoTA-RAG's routing votes)."""
        llm = self._load()
        with self._lock:
            try:
                with model_time("llm"):
                    out = llm.create_chat_completion(messages=messages, max_tokens=max_tokens,
                                                     temperature=temperature, seed=0 if seed is None else seed)
            except Exception as e:  # llama.cpp raises ValueError/RuntimeError
                raise LLMError(f"llama-cpp: {type(e).__name__}: {e}") from e
        return out["choices"][0]["message"]["content"] or ""

    def chat_many(self, requests: list[list[dict]], *, max_tokens: int,
                  temperature: float = 0.0, seed: int | None = None) -> list[str | LLMError]:
        """Sequential (one llama.cpp context); a failure is returned in place, not raised.
        ``seed`` as in :meth:`chat`, for every request."""
        if seed is None:
            return chat_each(self, requests, max_tokens=max_tokens, temperature=temperature)
        results: list[str | LLMError] = []
        for messages in requests:
            try:
                results.append(self.chat(messages, max_tokens=max_tokens, temperature=temperature, seed=seed))
            except LLMError as e:
                results.append(e)
        return results
