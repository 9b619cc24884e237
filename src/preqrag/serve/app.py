"""The FastAPI application of ``preqrag serve``: an HTTP API and a web page.

Routes (every ``/v1`` route requires the API key when one is configured):

* ``POST /v1/answer``   ``{"question", "pipeline"?, "id"?}`` → ``{"pipeline", "answer"`` (the
  LiveRAG answer object) ``, "trace", "citations", "doc_ids", "gold_doc_ids", "served"}``;
* ``POST /v1/retrieve`` same body → the trace without generation, plus ``context`` (the
  passages that would be given to the LLM);
* ``POST /v1/batch``    ``{"questions": [str | {"question", "id"?}], "pipeline"?,
  "retrieve_only"?}`` → ``{"pipeline", "results": [...]}``, one result per question, in order;
* ``GET /v1/config``    the pipelines' configurations, the limits, example questions;
* ``GET /v1/stats``     queue and worker counters;
* ``GET /healthz``      200 once every model is loaded, 503 ``not_ready`` before;
* ``GET /``             the web page (``static/``); OpenAPI schema at ``/openapi.json``,
  interactive docs at ``/docs``.

Every error is JSON ``{"error": code, "message": text}`` with a stable ``code``:
``bad_json`` (400), ``unauthorized`` (401), ``not_found`` (404), ``method_not_allowed``
(405), ``body_too_large`` (413), ``bad_request``, ``empty_question``,
``question_too_long``, ``too_many_questions``, ``unknown_pipeline`` (422), ``queue_full``
(429, with ``Retry-After``), ``question_failed`` (500, with ``stage``), ``internal_error``
(500), ``not_ready`` (503), ``timeout`` (504).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import itertools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..components.citations import ids_to_numbers, marker_citations
from ..core.config import PipelineConfig
from ..run.pipeline import Pipeline
from ..core.records import Question
from .worker import NotReady, PipelineWorker, QueueFull, Served

log = logging.getLogger("preqrag.serve")

STATIC = Path(__file__).parent / "static"

PAGE_HEADERS = {
    # Defence in depth: the page builds its DOM with textContent only, and even so no inline
    # script, no inline handler (onerror=...) and no foreign origin may run.
    "Content-Security-Policy": ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                                "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
                                "frame-ancestors 'none'"),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


@dataclass
class ServeSettings:
    """Limits and options of a server.

    Attributes:
        max_queue: questions waiting for the worker before requests get 429 (see
            :class:`~preqrag.serve.worker.PipelineWorker`).
        batch_size: questions per micro-batch; ``None`` = each pipeline's ``run.batch_size``.
        timeout_s: seconds a request may wait for its answer (queue + processing) before
            504 ``timeout``. Default 300: a full queue of the bundled models on 2 cores.
        max_body_bytes: request bodies above this get 413 ``body_too_large``. Default 1 MB:
            room for a batch of 64 long questions; nothing legitimate is bigger.
        max_question_chars: longer questions get 422 ``question_too_long``. Default 2000
            characters (~500 tokens): LiveRAG questions are under 300.
        max_batch: most questions in one ``/v1/batch`` request (422 ``too_many_questions``).
        api_key: required on every ``/v1`` route when set (``Authorization: Bearer KEY`` or
            ``X-API-Key: KEY``); ``None`` = no check (only allowed on a loopback bind).
        cors_origins: origins allowed by CORS; empty = CORS off (same-origin only).
        index: the index directory, shown by ``/v1/config``.
    """

    max_queue: int = 64
    batch_size: int | None = None
    timeout_s: float = 300.0
    max_body_bytes: int = 1_000_000
    max_question_chars: int = 2000
    max_batch: int = 64
    api_key: str | None = None
    cors_origins: list[str] = field(default_factory=list)
    index: str | None = None


class ApiError(StarletteHTTPException):
    """An error answered as ``{"error": code, "message": message, **extra}``.

    A subclass of Starlette's HTTPException so that FastAPI re-raises it unchanged when it is
    raised while the body is being read (the body-size limit)."""

    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None,
                 **extra: Any):
        super().__init__(status_code=status, detail=message, headers=headers)
        self.code = code
        self.message = message
        self.extra = extra


def _error(http_status: int, code: str, message: str, headers: dict[str, str] | None = None,
           **extra) -> JSONResponse:
    return JSONResponse({"error": code, "message": message, **extra}, status_code=http_status, headers=headers)


# ---------------------------------------------------------------------- request bodies
NOT_BLANK = "[^" + "".join(f"\\u{ord(c):04x}" for c in map(chr, range(0x3001)) if c.isspace()) + "]"
"""JSON Schema ``pattern`` of a question: at least one character that is not white space in
Python's sense (``str.isspace``, what the server strips), so that a schema-valid question is
never refused as empty (found by schemathesis, issue 25)."""


class AskRequest(BaseModel):
    """Body of ``/v1/answer`` and ``/v1/retrieve``."""

    model_config = ConfigDict(extra="forbid")

    question: StrictStr = Field(description="The question (non-empty after trimming; at most max_question_chars).")
    pipeline: StrictStr | None = Field(None, description="Pipeline name (see /v1/config); null = the default.")
    id: StrictStr | StrictInt | None = Field(None, description=(
        "Id echoed in the answer; null = assigned by the server. Strict types: false is not 0."))


class BatchItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: StrictStr
    id: StrictStr | StrictInt | None = None


class BatchRequest(BaseModel):
    """Body of ``/v1/batch``."""

    model_config = ConfigDict(extra="forbid")

    questions: list[StrictStr | BatchItem] = Field(description="Questions, as strings or {question, id?}.")
    pipeline: StrictStr | None = None
    retrieve_only: StrictBool = Field(False, description="true: traces only, no generation (as /v1/retrieve).")


# ---------------------------------------------------------------------- response bodies
class ErrorBody(BaseModel):
    """Every error: a stable ``error`` code (module docstring lists them) and a ``message``;
    ``question_failed`` adds the failed ``stage`` (and ``pipeline``, ``trace``), ``bad_request``
    the failing ``details``, ``not_ready`` the worker ``state``."""

    model_config = ConfigDict(extra="allow")

    error: str
    message: str


class ServedInfo(BaseModel):
    model_config = ConfigDict(extra="allow")

    batch_size: int
    queued_s: float
    run_s: float


class AnswerBody(BaseModel):
    """One answered question: ``answer`` (the LiveRAG answer object; ``/v1/answer``) or
    ``id``/``question``/``context`` (``/v1/retrieve``), with the trace of every stage."""

    model_config = ConfigDict(extra="allow")

    pipeline: str
    trace: dict[str, Any] | None
    doc_ids: dict[str, str] = Field(description="passage id -> its document id, for every passage in the trace")
    gold_doc_ids: list[str] | None
    served: ServedInfo
    answer: dict[str, Any] | None = None
    citations: list[dict[str, Any]] | None = None
    context: list[dict[str, Any]] | None = None


class BatchResult(BaseModel):
    """One question of a batch: its ``id`` and either :class:`AnswerBody`'s fields or
    :class:`ErrorBody`'s (``question_failed``)."""

    model_config = ConfigDict(extra="allow")

    id: str | int


class BatchBody(BaseModel):
    model_config = ConfigDict(extra="allow")

    pipeline: str
    results: list[BatchResult]


ERRORS = {code: {"model": ErrorBody, "description": text} for code, text in {
    400: "bad_json", 401: "unauthorized", 413: "body_too_large",
    422: "bad_request, empty_question, question_too_long, too_many_questions, unknown_pipeline",
    429: "queue_full (Retry-After header)", 500: "question_failed (with stage), internal_error",
    503: "not_ready", 504: "timeout"}.items()}
"""The error responses of every ``/v1`` question route, with their body schema."""


def _constrain(schema: dict, settings: "ServeSettings", names: list[str]) -> dict:
    """Put the server's limits into the OpenAPI schema, so that what the schema allows is what
    the server accepts: question length and a non-blank pattern, the batch size, the
    pipeline names (a fuzzer that trusts the schema, schemathesis, checks both ways)."""
    comps = schema.get("components", {}).get("schemas", {})
    question = {"type": "string", "minLength": 1, "maxLength": settings.max_question_chars, "pattern": NOT_BLANK}
    pipeline = {"anyOf": [{"type": "string", "enum": names}, {"type": "null"}]}
    for name, prop, extra in (("AskRequest", "question", question), ("BatchItem", "question", question),
                               ("AskRequest", "pipeline", pipeline), ("BatchRequest", "pipeline", pipeline)):
        if name in comps:
            comps[name]["properties"][prop] = {**comps[name]["properties"][prop], **extra}
    if "BatchRequest" in comps:
        props = comps["BatchRequest"]["properties"]
        props["questions"]["minItems"] = 1
        props["questions"]["maxItems"] = min(settings.max_batch, settings.max_queue)
        for alt in props["questions"]["items"].get("anyOf", []):
            if alt.get("type") == "string":
                alt.update(question)
    return schema


# ---------------------------------------------------------------------- guard
def _key_matches(headers: list[tuple[bytes, bytes]], api_key: str) -> bool:
    given = None
    for name, value in headers:
        if name == b"x-api-key":
            given = value
        elif name == b"authorization" and value[:7].lower() == b"bearer " and given is None:
            given = value[7:].strip()
    return given is not None and hmac.compare_digest(given, api_key.encode())


class _Guard:
    """ASGI middleware, outermost, so it runs before any body is read or parsed:

    * every ``/v1`` route needs the API key when one is set (401 ``unauthorized``);
    * 413 ``body_too_large`` when ``Content-Length`` exceeds the limit, or when a body sent
      without one (chunked) grows past it while being read (nothing more is buffered).
    """

    def __init__(self, app, max_bytes: int, api_key: str | None):
        self.app = app
        self.max_bytes = max_bytes
        self.api_key = api_key

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = scope.get("headers", [])
        path = scope.get("path", "")
        if self.api_key is not None and (path == "/v1" or path.startswith("/v1/")) \
                and scope.get("method") != "OPTIONS" and not _key_matches(headers, self.api_key):
            return await _error(401, "unauthorized", "missing or wrong API key (Authorization: Bearer KEY)",
                                headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)
        for name, value in headers:
            if name == b"content-length":
                try:
                    too_big = int(value) > self.max_bytes
                except ValueError:
                    too_big = False
                if too_big:
                    return await _error(413, "body_too_large",
                                        f"request body over {self.max_bytes} bytes")(scope, receive, send)
        seen = 0

        async def limited():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise ApiError(413, "body_too_large", f"request body over {self.max_bytes} bytes")
            return message

        await self.app(scope, limited, send)


# ---------------------------------------------------------------------- citations
def _answer_citations(outcome, answer) -> list[dict[str, Any]]:
    """``[{"sentence", "passages": [1-based numbers in the answer's passages]}]``: the generator's
    own citations when it cites (``Trace.citations``), else the ``[n]`` markers of the answer
    text (:mod:`preqrag.components.citations`)."""
    cited = getattr(outcome.trace, "citations", None) if outcome.trace is not None else None
    if cited is None:
        pairs = marker_citations(answer.answer, len(answer.passages))
    else:
        pairs = ids_to_numbers([(c.sentence, c.passage_ids) for c in cited], outcome.trace.context_ids)
    return [{"sentence": sentence, "passages": nums} for sentence, nums in pairs]


def _retrieved(fut: asyncio.Future) -> None:
    """Mark an abandoned future's outcome as seen (no "exception was never retrieved" log)."""
    if not fut.cancelled():
        fut.exception()


# ---------------------------------------------------------------------- the app
def create_app(factories: Mapping[str, Callable[[], Pipeline]], configs: Mapping[str, PipelineConfig],
               settings: ServeSettings | None = None, *, gold: Mapping[str, list[str]] | None = None,
               on_failure: Callable[[str], None] | None = None) -> FastAPI:
    """Build the FastAPI app of ``preqrag serve``.

    Args:
        factories: pipeline name → callable that builds that pipeline with its models loaded
            (the first name is the default pipeline). Called once each, on the worker thread,
            when the app starts (lifespan startup), in the background: the server binds
            and answers ``/healthz`` (503 ``not_ready``) while the models load.
        configs: pipeline name → its configuration (for ``/v1/config``; same keys as
            ``factories``).
        settings: limits and options; defaults as in :class:`ServeSettings`.
        gold: question text (trimmed) → gold document ids, from a question file given at
            start; an asked question equal to one of them gets ``gold_doc_ids`` in its
            response, which the page marks.
        on_failure: called with the message when loading a pipeline fails (``preqrag
            serve`` stops the server, exit code 2).

    Returns:
        The app; ``app.state.worker`` is its :class:`PipelineWorker`.
    """
    settings = settings or ServeSettings()
    names = list(factories)
    if set(configs) != set(names):
        raise ValueError("configs and factories must name the same pipelines")
    worker = PipelineWorker(factories, max_queue=settings.max_queue, batch_size=settings.batch_size,
                            on_failure=on_failure)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        worker.start()  # loads in the background: the socket is bound before models are ready
        try:
            yield
        finally:
            await asyncio.get_running_loop().run_in_executor(None, worker.stop)

    app = FastAPI(title="preqrag serve", version="1", lifespan=lifespan,
                  description="PreQRAG question answering: answer, retrieve (trace only), batch.")

    def openapi() -> dict:
        if app.openapi_schema is None:
            from fastapi.openapi.utils import get_openapi

            app.openapi_schema = _constrain(get_openapi(title=app.title, version=app.version,
                                                        description=app.description, routes=app.routes),
                                            settings, names)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    app.state.worker = worker
    app.state.settings = settings
    app.add_middleware(_Guard, max_bytes=settings.max_body_bytes, api_key=settings.api_key)
    if settings.cors_origins:  # outside the guard, so that its refusals carry CORS headers too
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=list(settings.cors_origins),
                           allow_methods=["GET", "POST"], allow_headers=["Authorization", "X-API-Key",
                                                                         "Content-Type"])
    _add_error_handlers(app)
    _add_routes(app, _Api(names, settings, worker, dict(gold or {})), configs)
    _add_page(app)
    return app


def _add_error_handlers(app: FastAPI) -> None:
    """Every error as ``{"error": code, "message": text}`` (the module docstring's codes)."""

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError):
        return _error(exc.status_code, exc.code, exc.message, headers=exc.headers, **exc.extra)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError):
        errors = exc.errors()
        if any(e.get("type") == "json_invalid" for e in errors):
            return _error(400, "bad_json", "the request body is not valid JSON")
        details = [{"field": ".".join(str(x) for x in e.get("loc", ()) if x != "body"), "message": e.get("msg")}
                   for e in errors]
        msg = "; ".join(f"{d['field'] or 'body'}: {d['message']}" for d in details)
        return _error(422, "bad_request", msg or "invalid request", details=details)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException):
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, f"http_{exc.status_code}")
        return _error(exc.status_code, code, str(exc.detail), headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception):
        log.exception("unexpected error on %s", request.url.path)
        return _error(500, "internal_error", f"{type(exc).__name__}: {exc}")


class _Api:
    """What the question routes share: the pipelines' ``names`` (the first is the default), the
    limits, the worker, the gold documents of known questions; request checks, the wait for the
    worker, and the response bodies (built from :class:`AnswerBody` and :class:`ErrorBody`)."""

    def __init__(self, names: list[str], settings: ServeSettings, worker: PipelineWorker,
                 gold: dict[str, list[str]]):
        self.names, self.settings, self.worker, self.gold = names, settings, worker, gold
        self._ids = itertools.count(1)

    def pipeline_name(self, name: str | None) -> str:
        if name is None:
            return self.names[0]
        if name not in self.names:
            raise ApiError(422, "unknown_pipeline", f"unknown pipeline {name!r}; known: {', '.join(self.names)}")
        return name

    def question(self, text: str, qid: str | int | None, where: str = "question") -> Question:
        limit = self.settings.max_question_chars
        if len(text) > limit:  # as sent (the schema's maxLength)
            raise ApiError(422, "question_too_long", f"{where} has {len(text)} characters; the limit is {limit}")
        text = text.strip()
        if not text:
            raise ApiError(422, "empty_question", f"{where} is empty")
        return Question(id=qid if qid is not None else f"q{next(self._ids)}", question=text)

    async def served(self, request: Request, name: str, op: str,
                     questions: list[Question]) -> list[Served | BaseException]:
        """Submit, then wait (up to the timeout) while watching for the client going away."""
        worker, timeout = self.worker, self.settings.timeout_s
        try:
            futures = worker.submit(name, op, questions)  # type: ignore[arg-type]
        except NotReady as e:
            raise ApiError(503, "not_ready", str(e), headers={"Retry-After": "5"})
        except QueueFull as e:
            raise ApiError(429, "queue_full", str(e), headers={"Retry-After": str(e.retry_after)})
        gathered = asyncio.gather(*[asyncio.wrap_future(f) for f in futures], return_exceptions=True)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            while True:
                left = deadline - loop.time()
                if left <= 0:
                    raise ApiError(504, "timeout", f"no answer within {timeout:g}s")
                done, _ = await asyncio.wait({gathered}, timeout=min(0.5, left))
                if done:
                    return gathered.result()
                if await request.is_disconnected():
                    log.info("client went away; dropping %d queued question(s)", len(futures))
                    raise ApiError(499, "client_disconnected", "the client closed the connection")
        finally:
            if not gathered.done():
                worker.discard(futures)  # frees their queue places now
                gathered.cancel()
                gathered.add_done_callback(_retrieved)

    def answer_body(self, name: str, s: Served, op: str) -> dict[str, Any]:
        """:class:`AnswerBody` of one served question (``answer`` and ``citations`` for
        ``op = "answer"``; ``id``, ``question`` and ``context`` for ``"retrieve"``)."""
        o = s.outcome
        fields: dict[str, Any] = dict(
            pipeline=name, trace=o.trace.model_dump(mode="json") if o.trace is not None else None,
            doc_ids=s.doc_ids, gold_doc_ids=self.gold.get(o.question.question),
            served=ServedInfo(batch_size=s.batch_size, queued_s=s.queued_s, run_s=s.run_s))
        if op == "answer":
            a = o.answer
            fields.update(answer=a.model_dump(mode="json") if a is not None else None,
                          citations=_answer_citations(o, a) if a is not None else [])
        else:
            fields.update(id=o.question.id, question=o.question.question, context=s.context)
        return AnswerBody(**fields).model_dump(mode="json", exclude_unset=True)

    @staticmethod
    def failure_body(s: Served | BaseException) -> dict[str, Any]:
        """:class:`ErrorBody` of a question that failed (``question_failed``, with its stage) or
        could not run (``not_ready``)."""
        if isinstance(s, BaseException):
            if isinstance(s, NotReady):
                body = ErrorBody(error="not_ready", message=str(s))
            else:
                body = ErrorBody(error="question_failed", message=f"{type(s).__name__}: {s}", stage=None)
        else:
            f = s.outcome.failure
            body = ErrorBody(error="question_failed", message=f.error, stage=f.stage)
        return body.model_dump(mode="json", exclude_unset=True)

    def single(self, name: str, op: str, result: Served | BaseException) -> JSONResponse | dict[str, Any]:
        """The response to ``/v1/answer`` or ``/v1/retrieve``: the body, or the failure (500;
        503 before the models are loaded) with the pipeline and the trace so far."""
        if isinstance(result, BaseException) or result.outcome.failure is not None:
            fb = self.failure_body(result)
            status = 503 if fb["error"] == "not_ready" else 500
            trace = (result.outcome.trace.model_dump(mode="json")
                     if not isinstance(result, BaseException) and result.outcome.trace is not None else None)
            return JSONResponse({**fb, "pipeline": name, "trace": trace}, status_code=status)
        return self.answer_body(name, result, op)


def _add_routes(app: FastAPI, api: _Api, configs: Mapping[str, PipelineConfig]) -> None:
    """``/healthz`` and the ``/v1`` routes (the module docstring lists them)."""
    worker, settings, names = api.worker, api.settings, api.names

    @app.get("/healthz", tags=["service"], summary="200 once every model is loaded; 503 before",
             responses={503: ERRORS[503]})
    async def healthz():
        if worker.ready:
            return {"status": "ready", "pipelines": names, "load_seconds": round(worker.load_seconds or 0.0, 2)}
        message = {"failed": f"loading failed: {worker.error}", "stopped": "shutting down"}.get(
            worker.state, "models are still loading")
        return _error(503, "not_ready", message, headers={"Retry-After": "5"}, state=worker.state)

    @app.post("/v1/answer", tags=["v1"], response_model=None, responses={200: {"model": AnswerBody}, **ERRORS},
              summary="Answer one question: the LiveRAG answer object and its trace")
    async def answer(body: AskRequest, request: Request):
        name = api.pipeline_name(body.pipeline)
        (result,) = await api.served(request, name, "answer", [api.question(body.question, body.id)])
        return api.single(name, "answer", result)

    @app.post("/v1/retrieve", tags=["v1"], response_model=None, responses={200: {"model": AnswerBody}, **ERRORS},
              summary="Every stage but generation: the trace and the passages the LLM would get")
    async def retrieve(body: AskRequest, request: Request):
        name = api.pipeline_name(body.pipeline)
        (result,) = await api.served(request, name, "retrieve", [api.question(body.question, body.id)])
        return api.single(name, "retrieve", result)

    @app.post("/v1/batch", tags=["v1"], response_model=None, responses={200: {"model": BatchBody}, **ERRORS},
              summary="Several questions, through the same batched stages as `preqrag run`")
    async def batch(body: BatchRequest, request: Request):
        name = api.pipeline_name(body.pipeline)
        if not body.questions:
            raise ApiError(422, "empty_question", "questions is empty")
        limit = min(settings.max_batch, settings.max_queue)
        if len(body.questions) > limit:
            raise ApiError(422, "too_many_questions",
                           f"{len(body.questions)} questions; at most {limit} per request")
        qs = [api.question(q, None, f"questions[{i}]") if isinstance(q, str)
              else api.question(q.question, q.id, f"questions[{i}]") for i, q in enumerate(body.questions)]
        op = "retrieve" if body.retrieve_only else "answer"
        results = await api.served(request, name, op, qs)
        out = []
        for q, r in zip(qs, results):
            if isinstance(r, BaseException) or r.outcome.failure is not None:
                out.append(BatchResult(id=q.id, question=q.question, **api.failure_body(r)))
            else:
                out.append(BatchResult(**{**api.answer_body(name, r, op), "id": q.id}))
        return BatchBody(pipeline=name, results=out).model_dump(mode="json", exclude_unset=True)

    @app.get("/v1/config", tags=["v1"], summary="Pipelines, their configuration and the limits",
             responses={401: ERRORS[401]})
    async def config():
        return {"default": names[0], "pipelines": {n: configs[n].model_dump(mode="json") for n in names},
                "index": settings.index,
                "limits": {"max_question_chars": settings.max_question_chars,
                           "max_body_bytes": settings.max_body_bytes, "max_batch": settings.max_batch,
                           "max_queue": settings.max_queue, "timeout_s": settings.timeout_s},
                "examples": list(api.gold)[:50]}

    @app.get("/v1/stats", tags=["v1"], summary="Queue and worker counters", responses={401: ERRORS[401]})
    async def stats():
        return {"state": worker.state, **worker.stats()}


def _add_page(app: FastAPI) -> None:
    """The web page at ``/`` and its files under ``/static``, with :data:`PAGE_HEADERS`."""

    @app.get("/", include_in_schema=False)
    async def page():
        return FileResponse(STATIC / "index.html", media_type="text/html; charset=utf-8", headers=PAGE_HEADERS)

    class _Static(StaticFiles):
        async def get_response(self, path, scope):
            response = await super().get_response(path, scope)
            response.headers.update(PAGE_HEADERS)
            return response

    app.mount("/static", _Static(directory=STATIC), name="static")
