"""The package's contracts, checked on the source (issue 23, issue 56): the import graph has no
cycle and no upward import, the layers are the packages, each system stands alone, no function is
over 120 lines, docs use placeholders, every executor has what the runner reads; marker citations.
With the small index: tests/integration/test_contracts_index.py; a system registered from outside
the package through ``preqrag run``: tests/e2e/test_plugin_system.py."""

from __future__ import annotations

import ast
import json

from conftest import REPO

SRC = REPO / "src" / "preqrag"


# ------------------------------------------------------------------ the import graph
def _unit(module: str) -> str:
    """The layer unit of a module: ``preqrag.x`` or ``preqrag.x.y`` → ``x`` (no exemption: a
    package's every module, its commands included, sits in the package's layer)."""
    parts = module.split(".")[1:]
    return parts[0] if parts else ""


def _imports() -> dict[str, set[str]]:
    """Module → the preqrag modules it imports (top-level and inside functions; TYPE_CHECKING
    blocks excluded)."""
    mods = {}
    for p in SRC.rglob("*.py"):
        parts = list(p.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = p
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for m, p in mods.items():
        package = m if p.name == "__init__.py" else m.rpartition(".")[0]
        tree = ast.parse(p.read_text(encoding="utf-8"))
        skip = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                skip.update(id(n) for n in ast.walk(node))
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            targets = []
            if isinstance(node, ast.ImportFrom):
                base = package.split(".")
                if node.level:
                    base = base[:len(base) - node.level + 1]
                    name = ".".join(base + ([node.module] if node.module else []))
                else:
                    name = node.module or ""
                targets = [f"{name}.{a.name}" if f"{name}.{a.name}" in mods else name for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for t in targets:
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t.startswith("preqrag") and t != m:
                    edges[m].add(t)
    return edges


def test_systems_stand_alone():
    """Each built-in system (``preqrag.systems.<name>``) imports the core and never another system, and
    no core module imports a system by statement (the core names them once, in ``config.SYSTEMS``,
    and imports them by name): a system can be added or removed as one folder."""
    from preqrag.core.config import SYSTEMS

    def system(module: str) -> str:
        parts = module.split(".")
        return parts[2] if len(parts) > 2 and parts[1] == "systems" else ""

    edges = _imports()
    crossing = sorted(f"{a} -> {b}" for a, bs in edges.items() for b in bs
                      if system(b) and system(a) != system(b))
    assert not crossing, "imports of a system from outside it:\n" + "\n".join(crossing)
    assert {m.split(".")[2] for m in edges if system(m)} == {s.rpartition(".")[2] for s in SYSTEMS}


def test_the_layers_are_the_packages():
    """``preqrag.LAYERS`` names each package of ``src/preqrag`` once, bottom up, and no module sits
    beside them but ``__init__.py`` (issue 56): a package is a layer; ``docs/architecture.md`` draws them."""
    from preqrag import LAYERS

    packages = sorted(p.parent.name for p in SRC.glob("*/__init__.py"))
    assert sorted(LAYERS) == packages and len(set(LAYERS)) == len(LAYERS), (LAYERS, packages)
    modules = sorted(p.name for p in SRC.glob("*.py") if p.name != "__init__.py")
    assert not modules, f"modules outside the layer packages: {modules} (move them into one)"


def _cycles(edges: dict[str, set[str]], unit) -> list[str]:
    """Pairs of units (``unit(module)``) that import each other, directly or through others."""
    graph: dict[str, set[str]] = {}
    for a, bs in edges.items():
        for b in bs:
            if unit(a) and unit(b) and unit(a) != unit(b):
                graph.setdefault(unit(a), set()).add(unit(b))

    def reach(start: str) -> set[str]:
        seen, stack = set(), [start]
        while stack:
            for nxt in graph.get(stack.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return seen

    return sorted(f"{a} <-> {b}" for a in graph for b in graph[a] if a in reach(b))


def test_no_import_cycle_and_no_upward_import():
    """A module imports only from its own layer package or one below it in ``preqrag.LAYERS``; no
    two packages import each other, nor two modules (or subpackages) of one package."""
    from preqrag import LAYERS

    layer = {unit: i for i, unit in enumerate(LAYERS)}
    edges = _imports()
    units = {_unit(m) for m in edges} - {""}
    assert units <= set(layer), f"modules in no layer: {sorted(units - set(layer))} (a layer is a package in preqrag.LAYERS)"
    upward = sorted(f"{a} -> {b}" for a, bs in edges.items() for b in bs
                    if _unit(a) and _unit(b) and layer[_unit(b)] > layer[_unit(a)])
    assert not upward, "imports from a higher layer:\n" + "\n".join(upward)
    cycles = _cycles(edges, _unit)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)
    # inside a layer package: its modules and subpackages (``preqrag.x.y``) as units
    inner = {a: {b for b in bs if _unit(b) == _unit(a)} for a, bs in edges.items()}
    cycles = _cycles(inner, lambda m: ".".join(m.split(".")[:3]) if m.count(".") >= 2 else "")
    assert not cycles, "import cycles inside a layer package:\n" + "\n".join(cycles)


MACHINE_PATH = r"(?<![\w.])/(?:tmp|work|root|home|check|Users)/"


def _commands(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "command" and isinstance(value, str):
                yield value
            else:
                yield from _commands(value)
    elif isinstance(node, list):
        for value in node:
            yield from _commands(value)


def test_docs_commands_use_placeholders_not_machine_paths():
    import re

    docs = REPO / "docs"
    found = []
    for p in sorted(docs.rglob("*")):
        if p.suffix in (".md", ".html"):
            found += [f"{p.name}: {m.group(0)}" for m in re.finditer(MACHINE_PATH + r"\S*", p.read_text(encoding="utf-8"))]
        elif p.suffix == ".json":
            found += [f"{p.name}: {c}" for c in _commands(json.loads(p.read_text(encoding="utf-8")))
                      if re.search(MACHINE_PATH, c)]
    assert not found, "machine paths in docs (use IDX, CACHE, OUT, ...):\n" + "\n".join(found[:20])


def test_marker_citations_and_id_mapping():
    from preqrag.components.citations import ids_to_numbers, marker_citations, numbers_to_ids

    answer = "Reefs grow slowly [1]. They need light [2, 3]! Nothing cited here. Out of range [7]."
    assert marker_citations(answer, 3) == [("Reefs grow slowly [1].", [1]), ("They need light [2, 3]!", [2, 3])]
    assert numbers_to_ids([("s", [1, 3, 9])], ["p1", "p2", "p3"]) == [("s", ["p1", "p3"])]
    assert ids_to_numbers([("s", ["p3", "x"]), ("t", [])], ["p1", "p2", "p3"]) == [("s", [3])]


def test_readme_example_question_is_answerable_from_the_corpus_readme_indexes():
    import gzip
    import re

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    corpus = re.search(r"preqrag index --corpus (\S+) --index \./idx", readme).group(1)
    question = re.search(r'preqrag ask --index \./idx "([^"]+)"', readme).group(1)
    bench = REPO / corpus
    questions = [json.loads(line) for line in open(bench.parent / "smoke.jsonl", encoding="utf-8")]
    (q,) = [q for q in questions if q["question"] == question]
    with gzip.open(bench, "rt", encoding="utf-8") as fh:
        ids = {json.loads(line)["id"] for line in fh}
    assert set(q["gold_doc_ids"]) <= ids


MAX_FUNCTION_LINES = 80
"""The longest a function in src/ may be (issues 42, 56): past it, split it where its phases are."""


def test_no_function_in_src_is_over_80_lines():
    long = []
    for p in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{p.relative_to(SRC.parent)}:{node.lineno} {node.name}: {n} lines")
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(long)


def test_every_executor_has_every_member_the_runner_reads():
    """run_questions reads the Executor protocol's members with no hasattr probing: the local,
    deadline and Ray executors each have all of them (issue 56)."""
    from types import SimpleNamespace
    from typing import get_type_hints

    from preqrag.core.config import PipelineConfig
    from preqrag.run.deadline import DeadlineRunner
    from preqrag.run.distributed import RayExecutor
    from preqrag.run.runner import Executor, LocalExecutor

    methods = [m for m in ("answered_batches", "model_usage") if callable(getattr(Executor, m, None))]
    attributes = set(get_type_hints(Executor)) - set(methods)
    assert methods == ["answered_batches", "model_usage"] and attributes == {"cfg", "fallbacks", "batches"}
    for cls in (LocalExecutor, DeadlineRunner, RayExecutor):
        assert all(callable(getattr(cls, m, None)) for m in methods), cls
    cfg = PipelineConfig()
    local = LocalExecutor(SimpleNamespace(cfg=cfg))
    ray = RayExecutor(None, cfg, 1)  # Ray starts only on __enter__
    for ex in (local, ray):
        assert all(hasattr(ex, a) for a in attributes), ex
    assert local.model_usage() is None and (local.fallbacks, local.batches) == (0, [])
    assert ray.model_usage() == ({}, {})
    init = DeadlineRunner.__init__.__code__.co_names
    assert {"fallbacks", "batches", "cfg"} <= set(init)


def test_every_backend_has_every_member_its_stage_protocol_declares():
    """The pipeline, the caches and the deadline call ``warm_up`` and ``set_call_deadline``
    directly, with no getattr probing (issue 56): every class in src/ that implements a stage
    protocol's main method (``chat_many``, ``encode``, ``score`` of (query, passage) pairs,
    ``rerank``, ``prefer``, a dense retriever's ``vectors``) has every method and property that protocol declares."""
    import importlib
    import inspect
    import pkgutil

    import preqrag
    from preqrag.core import contracts
    from preqrag.systems.ginger.pairwise import PairScorer

    # (main method, protocol, the package it is looked for in): `score` of (query, passage) pairs
    # only in models/rerankers (the learned ranker's `score` takes a feature matrix)
    protocols = [("chat_many", contracts.LLM, "preqrag."), ("encode", contracts.Encoder, "preqrag."),
                 ("rerank", contracts.RerankStep, "preqrag."), ("prefer", PairScorer, "preqrag."),
                 ("score", contracts.Reranker, "preqrag.models.rerankers"),
                 ("vectors", contracts.DenseRetriever, "preqrag.")]
    found, missing = {}, []
    for mod in pkgutil.walk_packages(preqrag.__path__, "preqrag."):
        if mod.name.endswith("__main__"):
            continue
        module = importlib.import_module(mod.name)
        for cls in vars(module).values():
            if not inspect.isclass(cls) or cls.__module__ != module.__name__ or getattr(cls, "_is_protocol", False):
                continue
            for method, proto, package in protocols:
                if method not in vars(cls) or not module.__name__.startswith(package):
                    continue
                found.setdefault(proto.__name__, []).append(cls.__name__)
                declared = [n for n, v in vars(proto).items()
                            if not n.startswith("_") and (callable(v) or isinstance(v, property))]
                missing += [f"{module.__name__}.{cls.__name__}.{n} ({proto.__name__})"
                            for n in declared if not hasattr(cls, n)]
    assert not missing, "members a stage protocol declares are missing:\n" + "\n".join(missing)
    assert {"LlamaCppLLM", "OpenAICompatibleLLM", "CachedLLM"} <= set(found["LLM"])
    assert {"CrossEncoderStep", "MMRStep", "BM25PruneStep", "PairwiseStep"} <= set(found["RerankStep"])
    assert {"OnnxEncoder", "CachedEncoder"} <= set(found["Encoder"])
    assert {"OnnxCrossEncoder", "CachedReranker", "RecentScores"} <= set(found["Reranker"])
    assert {"DenseRetriever", "MilvusDenseRetriever"} <= set(found["DenseRetriever"])  # what Index.dense may be
