"""Continuous batching on one llama.cpp model: several conversations decoded together.

Decoding one sequence is memory-bound: every new token reads all the weights, and on a CPU
that leaves most of the arithmetic idle (Qwen2.5-Coder-1.5B on 2 cores: 11-31 tokens/s of
decode against 36-163 tokens/s of prefill). Decoding *n* sequences in one ``llama_decode``
reads the weights once for *n* tokens, so the decode rate grows almost *n*-fold until the
matrix kernels are compute-bound (docs/bench/batching.json has the measured rates).

:class:`BatchDecoder` is the loop llama.cpp's own server runs (``llama-server``'s slots, its
``n_parallel``), driven through llama-cpp-python's low-level API on the portable build (so
the CPU kernels chosen at run time stay the best for the machine):

* one ``llama_context`` with ``n_seq_max = n_parallel`` sequences, each with its own KV cache
  stream of ``n_ctx`` cells (``kv_unified = false``: a token attends over its own sequence's
  cells only);
* every step builds one ``llama_batch``: the next token of every decoding sequence, plus
  prompt chunks of sequences still being prefilled, up to ``n_batch`` tokens in all;
* a sequence **joins** as soon as a slot is free (its prompt is then prefilled in the same
  steps as the others' decoding) and **leaves** at its end-of-generation token or its
  ``max_tokens``; its KV cells are freed at once;
* each sequence has its own sampler chain, built as llama-cpp-python's ``Llama`` builds it
  (repetition penalties over the last 64 tokens, an optional GBNF grammar, then greedy at
  temperature 0 or top-k / typical / top-p / min-p / temperature / seeded draw), so a batched
  call takes the same options as a sequential one;
* a grammar (a JSON schema's) is checked **lazily**, as llama.cpp's own ``common_sampler``
  does: the token is drawn without it, and only when the grammar rejects that token are the
  logits masked by the grammar and the token drawn again. Masking costs a pass over the whole
  vocabulary (~21 ms a token for Qwen2.5's 151,936 tokens on one zen4 core, against ~0.5 ms
  for a plain draw), and the unmasked draw is almost always allowed; at temperature 0 the
  token is the same either way (the grammar only removes tokens);
* the prompt prefix every request of a call shares (the chat template's system turn and the
  instruction) is prefilled once into one more KV stream and copied into each sequence's
  (:data:`MIN_SHARED_PREFIX`), and kept for the next call with the same prefix, as the
  sequential path's prompt cache does;
* requests with the **same prompt** (several samples of one conversation: DoTA-RAG's routing
  votes, one seed each) prefill it once: a later one copies the first one's KV cells of the
  prompt (``llama_memory_seq_cp``) once they are in, or takes over its slot when it ends, and
  prefills only the prompt's last token (whose logits it samples from), as vLLM's prefix
  caching or llama.cpp server's ``n_cmpl`` do.

A request that cannot run (its prompt does not fit the window) fails alone: its slot gets an
:class:`~preqrag.core.contracts.LLMError` and the others go on. A deadline (epoch seconds) ends every
unfinished sequence with an LLMError at the first step after it.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from dataclasses import dataclass, field

from ...core.contracts import LLMError

PENALTY_LAST_N = 64
"""Tokens the repetition penalty looks back over: llama-cpp-python's ``last_n_tokens_size``
default, so a batched call penalises as a sequential ``create_chat_completion`` does."""

MIN_SHARED_PREFIX = 16
"""Prompt tokens all of a call's requests must share before the shared prefix is prefilled once
and copied into each sequence's KV stream (``llama_memory_seq_cp``): the chat template's system
turn and the instruction before the passages (~55 tokens of Qwen2.5's answer prompt). Requests
with the whole same prompt (DoTA-RAG's seeded votes of one question) share it besides, whatever
its length (:func:`_next_job`)."""

DEFAULT_SAMPLING = {"top_k": 40, "top_p": 0.95, "min_p": 0.05, "repeat_penalty": 1.0}
"""llama-cpp-python's ``create_chat_completion`` defaults for what a call leaves unset."""


@dataclass
class Job:
    """One conversation to complete.

    Attributes:
        tokens: the prompt, tokenized with the chat template applied (ints, BOS included when
            the template does not add it).
        max_tokens: most tokens to generate (cut further to the window).
        temperature: 0 = greedy.
        seed: the sampling seed at temperature > 0.
        grammar: a ``llama_cpp.LlamaGrammar`` the reply must follow, or None.
        sampling: ``top_k``, ``top_p``, ``min_p``, ``repeat_penalty`` (missing: llama-cpp-python's
            defaults, :data:`DEFAULT_SAMPLING`).
        stop: strings that end the reply (the reply is cut before the first one).
    """

    tokens: list[int]
    max_tokens: int
    temperature: float = 0.0
    seed: int = 0
    grammar: object | None = None
    sampling: dict = field(default_factory=dict)
    stop: tuple[str, ...] = ()


@dataclass
class _Seq:
    index: int  # the job's position in the caller's list
    job: Job
    slot: int  # the llama.cpp seq_id (its KV stream)
    sampler: object  # the chain without the grammar
    grammar: object | None = None  # the grammar alone, checked lazily (_sample)
    fed: int = 0  # prompt tokens already in the KV cache
    out: list[int] = field(default_factory=list)
    pending: int | None = None  # the sampled token not yet in the KV cache
    logit_at: int = -1  # this step: the batch row whose logits are this sequence's


@dataclass
class BatchStats:
    """Counters of one :meth:`BatchDecoder.run` call: ``prompt_tokens`` prefilled,
    ``decoded_tokens`` generated, ``steps`` (``llama_decode`` calls), ``seconds`` (wall),
    ``max_parallel`` (most sequences in one step), ``shared_prefix`` (prompt tokens every
    request shared, prefilled once), ``reused_tokens`` (prompt tokens not prefilled because a
    request with the same prompt had them in its KV cells)."""

    prompt_tokens: int = 0
    shared_prefix: int = 0
    reused_tokens: int = 0
    decoded_tokens: int = 0
    steps: int = 0
    seconds: float = 0.0
    max_parallel: int = 0


class BatchDecoder:
    """Decode many conversations together on one loaded model (continuous batching).

    Args:
        llama: a loaded ``llama_cpp.Llama`` (its model, tokenizer and chat template are used;
            its own context is left alone, so its sequential path stays usable).
        n_parallel: sequences decoded together (``[llm] n_parallel``).
        n_ctx: KV cells per sequence (``[llm] n_ctx``): a job whose prompt plus one generated
            token does not fit fails with an LLMError; generation stops at the window.
        n_batch: most tokens per ``llama_decode`` (prompt chunks plus decode tokens).
        n_threads: CPU threads for llama.cpp.
        flash_attn: llama.cpp flash attention (faster on CPUs, as in the sequential path).

    Raises:
        ValueError: llama.cpp could not create the context (e.g. out of memory).
    """

    def __init__(self, llama, *, n_parallel: int, n_ctx: int, n_batch: int = 512, n_threads: int = 1,
                 flash_attn: bool = True):
        import llama_cpp
        from llama_cpp import _internals

        self.llama = llama
        self.n_parallel = n_parallel
        self.n_ctx = n_ctx
        self.n_batch = n_batch
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = n_ctx * (n_parallel + 1)  # one more stream holds the shared prompt prefix
        params.n_batch = params.n_ubatch = n_batch
        params.n_seq_max = n_parallel + 1
        params.n_threads = params.n_threads_batch = n_threads
        params.kv_unified = False
        params.flash_attn_type = (llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash_attn
                                  else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED)
        params.no_perf = True
        self._ctx = _internals.LlamaContext(model=llama._model, params=params, verbose=False)
        self._batch = _internals.LlamaBatch(n_tokens=n_batch, embd=0, n_seq_max=1, verbose=False)
        self._vocab = llama._model.vocab
        self._n_vocab = llama.n_vocab()
        self._candidates = _internals.LlamaTokenDataArray(n_vocab=self._n_vocab)  # the draws' logits
        self._one = _internals.LlamaTokenDataArray(n_vocab=1)  # one drawn token, for the grammar check
        self._prefix_seq = n_parallel  # the stream of the shared prefix
        self._prefix: list[int] = []  # the tokens in it
        self.last = BatchStats()

    # ------------------------------------------------------------------ sampling

    def _seq(self, index: int, job: Job, slot: int) -> _Seq:
        """A sequence for ``job`` in KV stream ``slot``, with its sampler chain and grammar."""
        from llama_cpp import _internals

        grammar = None
        if job.grammar is not None:
            grammar = _internals.LlamaSampler()
            grammar.add_grammar(self.llama._model, job.grammar)
        return _Seq(index, job, slot, self._sampler(job), grammar)

    def _sampler(self, job: Job):
        """The sampler chain of ``job`` as ``Llama._init_sampler`` builds it, less the grammar
        (checked lazily by :meth:`_sample`)."""
        from llama_cpp import _internals

        s = {**DEFAULT_SAMPLING, **{k: v for k, v in job.sampling.items() if v is not None}}
        chain = _internals.LlamaSampler()
        chain.add_penalties(n_vocab=self._n_vocab, penalty_last_n=PENALTY_LAST_N,
                            penalty_repeat=s["repeat_penalty"], penalty_freq=0.0, penalty_present=0.0)
        if job.temperature == 0.0:
            chain.add_greedy()
        else:
            chain.add_top_k(s["top_k"])
            chain.add_typical(1.0, 1)
            chain.add_top_p(s["top_p"], 1)
            chain.add_min_p(s["min_p"], 1)
            chain.add_temp(job.temperature)
            chain.add_dist(job.seed)
        return chain

    # ------------------------------------------------------------------ the loop

    def run(self, jobs: list[Job], *, deadline: float | None = None) -> list[list[int] | LLMError]:
        """Generate every job's reply tokens; returns one list of token ids (the end-of-generation
        token left out) or one LLMError per job, in ``jobs``' order. ``deadline``: epoch seconds
        after which unfinished jobs end with an LLMError (``deadline: ...``)."""
        import llama_cpp

        t0 = time.perf_counter()
        stats = BatchStats()
        results: list[list[int] | LLMError | None] = [None] * len(jobs)
        queue: deque[int] = deque()
        for i, job in enumerate(jobs):
            if not job.tokens:
                results[i] = LLMError("llama-cpp batch: empty prompt")
            elif len(job.tokens) + 1 > self.n_ctx:
                results[i] = LLMError(f"llama-cpp batch: Requested tokens ({len(job.tokens)}) exceed context "
                                      f"window of {self.n_ctx}")
            else:
                queue.append(i)
        free = list(range(self.n_parallel - 1, -1, -1))
        active: list[_Seq] = []
        mem = self._ctx.memory
        keys = [tuple(job.tokens) for job in jobs]
        holders: dict[tuple, _Seq] = {}  # prompt -> an active sequence whose KV cells hold it
        waiting = Counter(keys[i] for i in queue)  # queued requests per prompt
        try:
            shared = self._share_prefix([jobs[i].tokens for i in queue], stats)
            while queue or active:
                if deadline is not None and time.time() >= deadline:
                    for seq in active:
                        results[seq.index] = LLMError("deadline: the batch was cut at the call deadline")
                        llama_cpp.llama_memory_seq_rm(mem, seq.slot, -1, -1)
                    for i in queue:
                        results[i] = LLMError("deadline: not started before the call deadline")
                    active, queue = [], deque()
                    break
                while queue and free:
                    i = _next_job(queue, keys, holders)
                    if i is None:  # every queued request waits for its prompt's first prefill
                        break
                    queue.remove(i)
                    waiting[keys[i]] -= 1
                    seq = self._seq(i, jobs[i], free.pop())
                    lead = holders.get(keys[i])
                    if lead is not None:  # the same prompt is in lead's cells: copy them but its last token
                        # (llama.cpp copies a stream whole; lead's later cells are dropped from the copy)
                        seq.fed = len(seq.job.tokens) - 1
                        llama_cpp.llama_memory_seq_cp(mem, lead.slot, seq.slot, -1, -1)
                        llama_cpp.llama_memory_seq_rm(mem, seq.slot, seq.fed, -1)
                        stats.reused_tokens += seq.fed
                    else:
                        holders[keys[i]] = seq
                        if shared:
                            llama_cpp.llama_memory_seq_cp(mem, self._prefix_seq, seq.slot, -1, -1)
                            seq.fed = shared
                    active.append(seq)
                stats.max_parallel = max(stats.max_parallel, len(active))
                self._fill(active, stats)
                self._ctx.decode(self._batch)
                stats.steps += 1
                for seq in [s for s in active if s.logit_at >= 0]:
                    done = self._advance(seq)
                    if done:
                        results[seq.index] = seq.out
                        active.remove(seq)
                        if not self._leave(seq, jobs, keys, holders, waiting, queue, active, stats):
                            free.append(seq.slot)
        except RuntimeError as e:  # llama_decode failed: the whole step is lost
            for seq in active:
                results[seq.index] = LLMError(f"llama-cpp batch: {e}")
            for i in queue:
                results[i] = LLMError(f"llama-cpp batch: {e}")
            llama_cpp.llama_memory_clear(mem, True)
            self._prefix = []
        stats.seconds = time.perf_counter() - t0
        stats.decoded_tokens = sum(len(r) for r in results if isinstance(r, list))
        self.last = stats
        return [r if r is not None else LLMError("llama-cpp batch: not run") for r in results]

    def _leave(self, seq: _Seq, jobs: list[Job], keys: list[tuple], holders: dict, waiting: Counter, queue: deque,
               active: list[_Seq], stats: BatchStats) -> bool:
        """Free ``seq``'s KV cells, or hand its slot, with the prompt's cells kept, to a queued
        request with the same prompt (it then prefills only the prompt's last token); True when
        the slot was handed on (it stays in use)."""
        import llama_cpp

        mem = self._ctx.memory
        key = keys[seq.index]
        if waiting[key] > 0:
            j = next(i for i in queue if keys[i] == key)
            queue.remove(j)
            waiting[key] -= 1
            heir = self._seq(j, jobs[j], seq.slot)
            heir.fed = len(heir.job.tokens) - 1
            llama_cpp.llama_memory_seq_rm(mem, seq.slot, heir.fed, -1)
            stats.reused_tokens += heir.fed
            active.append(heir)
            if holders.get(key) is seq:
                holders[key] = heir
            return True
        llama_cpp.llama_memory_seq_rm(mem, seq.slot, -1, -1)
        if holders.get(key) is seq:
            other = next((s for s in active if keys[s.index] == key), None)
            if other is None:
                del holders[key]
            else:
                holders[key] = other
        return False

    def _share_prefix(self, prompts: list[list[int]], stats: BatchStats) -> int:
        """Tokens of ``prompts``' common prefix now in the prefix stream (0: none shared). Each
        prompt keeps at least its last token to prefill itself (its first logits come from it)."""
        import llama_cpp

        if len(prompts) < 2:
            return 0
        first = prompts[0]
        n = min(len(p) for p in prompts) - 1
        for p in prompts[1:]:
            k = 0
            while k < n and p[k] == first[k]:
                k += 1
            n = k
        if n < MIN_SHARED_PREFIX:
            return 0
        prefix = first[:n]
        if prefix != self._prefix:
            llama_cpp.llama_memory_seq_rm(self._ctx.memory, self._prefix_seq, -1, -1)
            self._prefix = []
            b = self._batch.batch
            for start in range(0, n, self.n_batch):
                chunk = prefix[start:start + self.n_batch]
                for j, token in enumerate(chunk):
                    b.token[j], b.pos[j] = token, start + j
                    b.seq_id[j][0], b.n_seq_id[j], b.logits[j] = self._prefix_seq, 1, False
                b.logits[len(chunk) - 1] = True
                b.n_tokens = len(chunk)
                self._ctx.decode(self._batch)
                stats.steps += 1
            stats.prompt_tokens += n
            self._prefix = prefix
        stats.shared_prefix = n
        return n

    def _fill(self, active: list[_Seq], stats: BatchStats) -> None:
        """Put this step's tokens in the batch: one per decoding sequence first, then prompt
        chunks (oldest sequence first) up to ``n_batch`` tokens."""
        b = self._batch.batch
        n = 0

        def put(token: int, pos: int, slot: int, logits: bool) -> None:
            nonlocal n
            b.token[n], b.pos[n] = token, pos
            b.seq_id[n][0], b.n_seq_id[n] = slot, 1
            b.logits[n] = logits
            n += 1

        for seq in active:
            seq.logit_at = -1
            if seq.pending is not None:
                seq.logit_at = n
                put(seq.pending, len(seq.job.tokens) + len(seq.out) - 1, seq.slot, True)
                seq.pending = None
        for seq in active:
            todo = len(seq.job.tokens) - seq.fed
            if todo <= 0 or n >= self.n_batch:
                continue
            take = min(todo, self.n_batch - n)
            for k in range(seq.fed, seq.fed + take):
                put(seq.job.tokens[k], k, seq.slot, False)
            seq.fed += take
            stats.prompt_tokens += take
            if seq.fed == len(seq.job.tokens):  # the prompt is in: sample from its last token
                b.logits[n - 1] = True
                seq.logit_at = n - 1
        b.n_tokens = n

    def _advance(self, seq: _Seq) -> bool:
        """Sample ``seq``'s next token from this step's logits; True when the sequence ended."""
        import llama_cpp

        token = self._sample(seq)
        if llama_cpp.llama_vocab_is_eog(self._vocab, token):
            return True
        seq.out.append(token)
        room = self.n_ctx - len(seq.job.tokens)
        if len(seq.out) >= min(seq.job.max_tokens, room):
            return True
        if seq.job.stop and self._stopped(seq):
            return True
        seq.pending = token
        return False

    def _sample(self, seq: _Seq) -> int:
        """Draw ``seq``'s next token from this step's logits and accept it into its samplers.

        Without a grammar: the chain's ``llama_sampler_sample``. With one, llama.cpp's
        ``common_sampler_sample`` order: the chain draws from the unmasked logits; the grammar
        checks that one token; only if it is not allowed are the logits masked by the grammar
        (a pass over the vocabulary) and the chain draws again."""
        import ctypes

        import llama_cpp
        import numpy as np

        if seq.grammar is None:
            return llama_cpp.llama_sampler_sample(seq.sampler.sampler, self._ctx.ctx, seq.logit_at)
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(self._ctx.ctx, seq.logit_at),
                                       shape=(self._n_vocab,))
        cur, one = self._candidates, self._one
        cur.copy_logits(logits)
        cur.candidates.selected = -1
        llama_cpp.llama_sampler_apply(seq.sampler.sampler, ctypes.byref(cur.candidates))
        token = int(cur.candidates_data.id[cur.candidates.selected])
        one.copy_logits(np.zeros(1, dtype=np.single))
        one.candidates_data.id[0] = token
        one.candidates.selected = -1
        llama_cpp.llama_sampler_apply(seq.grammar.sampler, ctypes.byref(one.candidates))
        if not np.isfinite(one.candidates_data.logit[0]):  # not allowed here: mask, draw again
            cur.copy_logits(logits)
            cur.candidates.selected = -1
            llama_cpp.llama_sampler_apply(seq.grammar.sampler, ctypes.byref(cur.candidates))
            llama_cpp.llama_sampler_apply(seq.sampler.sampler, ctypes.byref(cur.candidates))
            token = int(cur.candidates_data.id[cur.candidates.selected])
        llama_cpp.llama_sampler_accept(seq.grammar.sampler, token)
        llama_cpp.llama_sampler_accept(seq.sampler.sampler, token)
        return token

    def _stopped(self, seq: _Seq) -> bool:
        tail = self.llama.detokenize(seq.out[-8:]).decode("utf-8", errors="ignore")
        return any(s in tail for s in seq.job.stop)

    def text(self, tokens: list[int], stop: tuple[str, ...] = ()) -> str:
        """The reply text of ``tokens``: detokenized (UTF-8, undecodable bytes dropped, as
        llama-cpp-python does) and cut before the first ``stop`` string."""
        out = self.llama.detokenize(tokens).decode("utf-8", errors="ignore")
        cut = min((out.find(s) for s in stop if s and s in out), default=-1)
        return out[:cut] if cut >= 0 else out


def _next_job(queue: deque, keys: list[tuple], holders: dict) -> int | None:
    """The queued request to start next: the first whose prompt an active sequence already
    holds (it copies those cells), else the first with a prompt no active sequence has; a
    request whose prompt is still being prefilled by another waits (None: all wait)."""
    new = None
    for i in queue:
        lead = holders.get(keys[i])
        if lead is None:
            if new is None:
                new = i
        elif lead.fed >= len(keys[i]) - 1:
            return i
    return new


def chat_formatter(llama):
    """A function ``messages -> (prompt tokens, stop strings)`` that applies ``llama``'s chat
    template as ``create_chat_completion`` does (the GGUF's own Jinja template), or None when
    the model's chat format is not its GGUF template (then the sequential path is used)."""
    from llama_cpp import llama_chat_format

    template = llama.metadata.get("tokenizer.chat_template")
    if not template or llama.chat_format != "chat_template.default" or llama.chat_handler is not None:
        return None
    vocab = llama._model

    def piece(token_id: int) -> str:
        return vocab.token_get_text(token_id) if token_id >= 0 else ""

    eos_id, bos_id = llama.token_eos(), llama.token_bos()
    formatter = llama_chat_format.Jinja2ChatFormatter(template=template, eos_token=piece(eos_id),
                                                      bos_token=piece(bos_id), stop_token_ids=[eos_id])

    def format_messages(messages: list[dict]) -> tuple[list[int], tuple[str, ...]]:
        result = formatter(messages=messages)
        tokens = llama.tokenize(result.prompt.encode("utf-8"), add_bos=not result.added_special, special=True)
        stop = result.stop if isinstance(result.stop, list) else [result.stop] if result.stop else []
        return tokens, tuple(s for s in stop if s)

    return format_messages


__all__ = ["BatchDecoder", "BatchStats", "Job", "chat_formatter", "PENALTY_LAST_N"]
