"""Structured LLM output: declared schemas, their llama.cpp grammars and OpenAI ``response_format``.

A 135M model cannot follow an output format by instruction alone; constrained decoding
makes every reply parse. Each step that parses LLM output declares an
:data:`~preqrag.core.contracts.OutputSchema`:

* a JSON Schema (``dict``, an object at the top): the reply is JSON text satisfying it;
* a choice (a list of strings): the reply is exactly one of them.

Backends turn the schema into their own mechanism:

* in-process llama.cpp: a GBNF grammar (:func:`grammar_text`: llama-cpp-python's own
  ``json_schema_to_gbnf`` converter for JSON Schemas; an alternation of literals for a
  choice) that masks every token that would leave the grammar;
* OpenAI-compatible servers: ``response_format`` (:func:`response_format`): ``{"type":
  "json_schema", ...}``, which vLLM, SGLang, llama.cpp's llama-server and OpenAI accept, or
  ``{"type": "json_object", "schema": ...}`` for llama-cpp-python's server (``[llm]
  structured_output``). A choice
  is sent as an object ``{"choice": <enum>}`` and unwrapped (:func:`unwrap_reply`), since
  OpenAI's strict mode wants an object at the top.

What parses can still make no sense (an unrelated rewrite, a repeated sub-question): the
steps keep those checks and record fallbacks. Helpers here build the schemas the steps use.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ...core.contracts import OutputSchema

CHOICE_KEY = "choice"
"""Property name of the object a choice is wrapped in for OpenAI-compatible servers."""

CHOICE_WRAP_TOKENS = 12
"""Reply tokens added to a choice call's budget on OpenAI-compatible servers for the
``{"choice": ...}`` object around the chosen string."""

JSON_SPACE_RULE = 'space ::= | " "'
"""Whitespace between JSON tokens: none or one blank. llama.cpp's converter allows a newline
and up to 20 indentation characters there; a small model then spends its token budget on
indentation (and may never close the object), so the grammar is tightened to this."""


CHARS_PER_TOKEN = 1.0
"""Characters a reply token is assumed to carry when a string's ``maxLength`` is fitted to a
token budget (:func:`chars_for`): the worst case, not the average (~4 for English text),
because a small model under a grammar can write one digit per token ("12345678901234...":
SmolLM2 and Qwen tokenise digits one by one), and a string cut by the budget does not parse."""


def chars_for(tokens: int, cap: int, overhead: int = 8) -> int:
    """The longest string (characters) a reply of ``tokens`` tokens is sure to hold beside
    ``overhead`` tokens of JSON around it: ``(tokens - overhead) * CHARS_PER_TOKEN``, at least 8,
    at most ``cap``. Budgets are upper bounds: a reply stops when its JSON closes."""
    return max(8, min(cap, int((tokens - overhead) * CHARS_PER_TOKEN)))


def is_choice(schema: OutputSchema | None) -> bool:
    """True for a choice among strings (a list or tuple)."""
    return isinstance(schema, (list, tuple))


def schema_key(schema: OutputSchema | None) -> str | None:
    """Canonical JSON of a schema (cache keys, grammar cache), or None."""
    if schema is None:
        return None
    return json.dumps(list(schema) if is_choice(schema) else schema, sort_keys=True, separators=(",", ":"))


def _gbnf_literal(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _enum_spelling(value: str) -> str:
    """How an ``enum`` string is spelled in the grammar and so in the reply: its JSON form with
    quotes, backslashes and control characters escaped and non-ASCII characters raw."""
    return json.dumps(value, ensure_ascii=False)


def json_string_token_bound(text: str, count) -> int:
    """An upper bound on the reply tokens a grammar-constrained model may spend writing ``text``
    as a JSON string (with its quotes), as the grammar of an ``enum`` holding it spells it.

    ``count`` of that spelling is the tokenizer's own (shortest-ish) split;
    under a grammar a small model may pick other tokens, so each escape adds one token (``\\``
    and the escaped character apart) and each non-ASCII character its UTF-8 bytes (byte-level
    tokens). Budgets built on the bare count ran out mid-string on passages with typographic
    quotes (3 of 50 GINGER questions with SmolLM2-135M, issue 22), leaving JSON that did not parse.

    Args:
        text: the string value.
        count: a token counter (``str -> int``) of the model that writes it.

    Returns:
        The bound in tokens (int, at least ``count`` of the spelling).
    """
    s = _enum_spelling(text)
    return count(s) + s.count("\\") + sum(len(ch.encode("utf-8")) for ch in s if ord(ch) > 127)


def grammar_text(schema: OutputSchema) -> str:
    """The GBNF grammar of ``schema``.

    A choice becomes ``root ::= "a" | "b" | ...``; a JSON Schema goes through
    ``llama_cpp.llama_grammar.json_schema_to_gbnf`` (which supports ``enum``, ``minLength``
    / ``maxLength``, ``minItems`` / ``maxItems``, ``required``), mended in three places: the
    whitespace rule is :data:`JSON_SPACE_RULE`; string ``enum`` values are written as GBNF
    literals here (the converter does not escape backslashes, so a quote, newline or non-ASCII
    letter in a value broke the grammar); and strings exclude raw control characters (the
    converter allows them, and JSON does not).

    Raises:
        ValueError: an empty choice, or a schema the converter rejects.
    """
    if is_choice(schema):
        options = [str(o) for o in schema]
        if not options:
            raise ValueError("a choice schema needs at least one option")
        return "root ::= " + " | ".join(_gbnf_literal(o) for o in options) + "\n"
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    literals: dict[str, str] = {}

    def mark(node):  # string enums become placeholders, written back below with exact escaping
        if isinstance(node, dict):
            out = {k: mark(v) for k, v in node.items()}
            if isinstance(node.get("enum"), list) and all(isinstance(v, str) for v in node["enum"]):
                out["enum"] = []
                for v in node["enum"]:
                    key = f"__preqrag_enum_{len(literals)}__"
                    literals[key] = v
                    out["enum"].append(key)
            return out
        if isinstance(node, list):
            return [mark(v) for v in node]
        return node

    text = json_schema_to_gbnf(json.dumps(mark(schema)))
    for key, value in literals.items():
        # the converter does not escape backslashes, so a quote, a newline or a non-ASCII
        # character in an enum value would break the grammar or let it emit invalid JSON. Non-ASCII
        # characters stay raw (valid JSON): a ``\\u201c`` escape costs a small model up to six
        # tokens, and such replies ran past their budget (3 of 50 GINGER questions, issue 22)
        text = text.replace(f'"\\"{key}\\""', _gbnf_literal(_enum_spelling(value)))
    text = re.sub(r"(?m)^space ::= .*$", JSON_SPACE_RULE, text)
    # JSON forbids raw control characters inside strings; the converter's char rule allows them
    # (a small model then writes a raw tab or newline that json.loads rejects)
    return re.sub(r'(?m)^(char ::= )\[\^"\\\\\]', r'\1[^"\\\\\\x00-\\x1F\\x7F]', text)


def openai_schema(schema: OutputSchema) -> dict:
    """The JSON Schema sent to an OpenAI-compatible server: ``schema`` itself, or for a choice
    ``{"type": "object", "properties": {"choice": {"type": "string", "enum": [...]}}, ...}``."""
    if is_choice(schema):
        return {"type": "object", "properties": {CHOICE_KEY: {"type": "string", "enum": list(schema)}},
                "required": [CHOICE_KEY], "additionalProperties": False}
    return schema


def response_format(schema: OutputSchema, name: str = "output", mode: str = "json_schema") -> dict:
    """The OpenAI ``response_format`` for ``schema``.

    ``mode = "json_schema"`` (``[llm] structured_output``, default): ``{"type": "json_schema",
    "json_schema": {"name", "schema"}}``, OpenAI's form, read by vLLM, SGLang and llama.cpp's
    llama-server; ``strict`` is left off because OpenAI's strict mode forbids ``maxLength`` /
    ``minItems``, which the steps use to bound replies. ``mode = "json_object"``: ``{"type":
    "json_object", "schema": ...}``, the form llama-cpp-python's server reads (it refuses
    ``json_schema``).

    Raises:
        ValueError: an unknown mode."""
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": name, "schema": openai_schema(schema)}}
    if mode == "json_object":
        return {"type": "json_object", "schema": openai_schema(schema)}
    raise ValueError(f"unknown structured output mode {mode!r}: 'json_schema' or 'json_object'")


def unwrap_reply(reply: str, schema: OutputSchema | None) -> str:
    """A server's reply in the contract's form: for a choice, the chosen string (unwrapped from
    ``{"choice": ...}``; the reply unchanged when it is not such an object, so the step's
    parser reports it); otherwise the reply unchanged."""
    if not is_choice(schema):
        return reply
    try:
        value = json.loads(reply)
    except (json.JSONDecodeError, TypeError):
        return reply
    if isinstance(value, dict) and isinstance(value.get(CHOICE_KEY), str):
        return value[CHOICE_KEY]
    if isinstance(value, str):
        return value
    return reply


def parse_json(reply: str) -> tuple[Any, str | None]:
    """``(value, None)`` for a reply that is JSON, else ``(None, reason)`` (``empty``, or
    ``unparsable JSON: <msg>``; e.g. a reply cut at ``max_tokens`` inside the object)."""
    if not reply or not reply.strip():
        return None, "empty"
    try:
        return json.loads(reply), None
    except json.JSONDecodeError as e:
        return None, f"unparsable JSON: {e.msg} at char {e.pos}"


def json_field(reply: str, key: str, kind: type) -> tuple[Any, str | None]:
    """The field ``key`` of a JSON-object reply when it is a ``kind`` (``str`` or ``list``):
    ``(value, None)``; else ``(None, reason)``: :func:`parse_json`'s ``empty`` / ``unparsable
    JSON: ...``, or ``unparsable: no 'key' field`` (``str``) / ``list`` (``list``) for JSON without
    it (a backend that ignored the schema)."""
    value, err = parse_json(reply)
    if err:
        return None, err
    field = value.get(key) if isinstance(value, dict) else None
    if not isinstance(field, kind):
        return None, f"unparsable: no {key!r} {'list' if kind is list else 'field'}"
    return field, None


def string_field(name: str, *, min_length: int = 1, max_length: int = 300) -> dict:
    """``{"type": "object", "properties": {name: string}, "required": [name]}``: one bounded
    string (``max_length`` in characters keeps the reply inside its token budget)."""
    return {"type": "object",
            "properties": {name: {"type": "string", "minLength": min_length, "maxLength": max_length}},
            "required": [name], "additionalProperties": False}


def string_list_field(name: str, *, min_items: int, max_items: int, min_length: int = 1,
                      max_length: int = 300, enum: list[str] | None = None) -> dict:
    """An object with one array of strings ``name`` holding ``min_items``..``max_items`` items,
    each ``min_length``..``max_length`` characters, or each one of ``enum`` when given."""
    item: dict = {"type": "string", "enum": list(enum)} if enum is not None else {
        "type": "string", "minLength": min_length, "maxLength": max_length}
    return {"type": "object",
            "properties": {name: {"type": "array", "items": item, "minItems": min_items, "maxItems": max_items}},
            "required": [name], "additionalProperties": False}


def chat_grouped(llm, requests: list[list[dict]], schemas: list[OutputSchema | None], max_tokens: list[int], *,
                 temperature: float = 0.0, **options) -> list:
    """``llm.chat_many`` for requests that differ in schema or reply budget: one call per
    distinct (schema, ``max_tokens``) pair, in first-seen order; replies come back in input
    order (a failed request: its LLMError in place).

    Args:
        requests: ``n`` conversations; ``schemas`` and ``max_tokens``: ``n`` each.
        options: passed to every call (``seed``, ``top_p``, ...; a ``seed`` list: one per request).
    """
    if not (len(requests) == len(schemas) == len(max_tokens)):
        raise ValueError("requests, schemas and max_tokens must have the same length")
    groups: dict[tuple[str | None, int], list[int]] = {}
    for i, (schema, m) in enumerate(zip(schemas, max_tokens)):
        groups.setdefault((schema_key(schema), m), []).append(i)
    out: list = [None] * len(requests)
    seeds = options.get("seed")
    for (_, m), idx in groups.items():
        if isinstance(seeds, (list, tuple)):  # one seed per request: this group's
            options = {**options, "seed": [seeds[i] for i in idx]}
        replies = llm.chat_many([requests[i] for i in idx], max_tokens=m, temperature=temperature,
                                schema=schemas[idx[0]], **options)
        for i, r in zip(idx, replies):
            out[i] = r
    return out
