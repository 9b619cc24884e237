"""A toy system registered from outside ``src/preqrag`` (issue 23): a retriever, a rerank step and a
generator, with their own settings table ``[toy]`` and a preset ``toy`` that selects them. Selected
by a TOML that imports this module (``imports = ["toy_system"]``, ``pipeline = "toy"``); no core
file knows it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from preqrag.components.registry import Context, register
from preqrag.core.config import register_table
from preqrag.core.presets import register_preset
from preqrag.core.records import Ranking
from preqrag.core.contracts import Generated


class ToySettings(BaseModel):
    """The toy system's own table, ``[toy]``."""

    model_config = ConfigDict(extra="forbid")
    prefix: str = Field("TOY:", description="Written before every toy answer.")
    min_word: int = Field(5, ge=1, description="Query words shorter than this are ignored by the toy retriever.")


class WordRetriever:
    """Passages that contain the query's longest word (case-insensitive), in index order."""

    name = "toy-word"
    learned_models = ()  # no model trained on the user's questions

    def __init__(self, index, min_word: int):
        self.index, self.min_word = index, min_word

    def search(self, queries, k, filters=None):
        ids = self.index.passage_ids
        out = []
        for q in queries:
            words = sorted((w.strip("?.,!").lower() for w in q.split() if len(w) >= self.min_word), key=len)
            if not words:
                out.append(Ranking())
                continue
            hits = [pid for pid in ids if words[-1] in self.index.text(pid).lower()][:k]
            out.append(Ranking(ids=hits, scores=[1.0 / (i + 1) for i in range(len(hits))]))
        return out


class ShortestFirst:
    """A rerank step: the head of each ranking, shortest passage first."""

    name = "toy-shortest"
    stage = "rerank-toy"
    trace_key = "toy"

    def warm_up(self):
        """No model to load (RerankStep declares it)."""

    def rerank(self, queries, rankings, text_of):
        out = []
        for r in rankings:
            head = sorted(r.ids[:10], key=lambda pid: (len(text_of(pid)), pid))
            out.append(Ranking(ids=head, scores=[float(-len(text_of(p))) for p in head]))
        return out


class EchoGenerator:
    """Answers with the prefix and the first 20 words of passage 1 (no LLM)."""

    name = "toy-echo"

    def __init__(self, settings: ToySettings):
        self.settings = settings

    def generate(self, questions, contexts, extras=None):
        return [Generated(final_prompt=f"toy: {q}",
                          answer=f"{self.settings.prefix} " + " ".join((c[0] if c else "").split()[:20]),
                          n_passages=min(1, len(c)))
                for q, c in zip(questions, contexts)]


register_table("toy", ToySettings)
register_preset("toy", {"rewriter": {"name": "none"}, "retrieval": {"extra": ["toy-word"]},
                        "rerank": {"chain": ["cross-encoder", "toy-shortest"]}, "generator": {"name": "toy-echo"}})


@register("retriever", "toy-word")
def _retriever(ctx: Context) -> WordRetriever:
    return WordRetriever(ctx.index, ctx.cfg.toy.min_word)


@register("rerank", "toy-shortest")
def _rerank(ctx: Context) -> ShortestFirst:
    return ShortestFirst()


@register("generator", "toy-echo")
def _generator(ctx: Context) -> EchoGenerator:
    return EchoGenerator(ctx.cfg.toy)
