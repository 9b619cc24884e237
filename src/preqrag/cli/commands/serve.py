"""``preqrag serve``: the HTTP API and web page (see :mod:`preqrag.serve.app`).

    preqrag serve --index IDX [--config preqrag.toml] [--host 127.0.0.1] [--port 8000]
        [--compare NAME=other.toml | --compare PRESET ...] [--questions gold.jsonl] [--api-key-env VAR]
        [--max-queue 64] [--timeout 300] [--cors-origin URL ...]
"""

from __future__ import annotations

import ipaddress
import logging
import os
from pathlib import Path
from typing import Optional

import typer

LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}

ONEDNN_CACHE_ENV = "ONEDNN_PRIMITIVE_CACHE_CAPACITY"
ONEDNN_CACHE_SERVE = "0"
"""oneDNN's primitive cache capacity in ``preqrag serve`` (unless the environment sets it).

On CPUs with native bf16 the sentence-transformers embedder runs under bf16 autocast, whose
matrix products are oneDNN primitives compiled per input shape and kept in a cache of 1,024
by default. A server embeds query batches of ever new shapes (1-64 questions × their token
lengths), so the cache grows for thousands of requests. Measured (300 random query batches,
MiniLM-L6, AVX-512-BF16): RSS +229 MiB with the default cache, +129 MiB with none, in about the
same time (25 vs 26 s, measured beside another job): compiling a primitive costs little next
to encoding. Batch jobs (index builds,
``preqrag run``) keep the default: their shapes repeat."""


def is_loopback(host: str) -> bool:
    """True when ``host`` only accepts connections from this machine (127.0.0.0/8, ::1,
    ``localhost``); ``0.0.0.0``, ``::`` and any other address or name are not."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def _gold(path: Path) -> dict[str, list[str]]:
    """Question text → gold document ids, for the lines of ``path`` that have ``gold_doc_ids``."""
    from ...core.io import read_questions

    try:
        qs, errors = read_questions(path)
    except FileNotFoundError:
        _fail(f"{path}: no such file")
    for e in errors:
        typer.echo(f"skipped question line {e}", err=True)
    gold: dict[str, list[str]] = {}
    for q in qs:
        ids = q.extra.get("gold_doc_ids")
        if isinstance(ids, list) and ids:
            gold[q.question.strip()] = [str(d) for d in ids]
    return gold


def _preset(config: Optional[Path], name: str):
    """The ``--config`` file (or the defaults) with preset ``name`` (see preqrag.core.presets)."""
    from ...core.config import ConfigError, load_config

    try:
        return load_config(config, pipeline=name)
    except ConfigError as e:
        _fail(f"--compare {name}: {e}")


def _api_key(api_key_env: str | None, host: str) -> str | None:
    """The API key held in ``$api_key_env`` (None without the option); exits when the variable
    is empty or when a non-loopback ``host`` would serve without a key."""
    api_key = None
    if api_key_env:
        api_key = os.environ.get(api_key_env) or None
        if api_key is None:
            _fail(f"--api-key-env {api_key_env}: the environment variable is unset or empty")
    if not is_loopback(host) and api_key is None:
        _fail(f"binding {host} exposes the server beyond this machine: give an API key with "
              "--api-key-env VAR (or bind 127.0.0.1)")
    return api_key


def _configs(config: Path | None, name: str, compare: list[str], open_config) -> dict:
    """``{pipeline name: configuration}``: ``--config`` as ``name``, then each ``--compare``
    (``NAME=path.toml`` or a preset ``NAME``); exits on a malformed or repeated name."""
    configs = {name: open_config(config)}
    for spec in compare:
        other, sep, path = spec.partition("=")
        if not other or (sep and not path):
            _fail(f"--compare {spec!r}: expected NAME=path.toml or a preset name")
        if other in configs:
            _fail(f"--compare {spec!r}: the name {other!r} is already used")
        configs[other] = open_config(Path(path)) if sep else _preset(config, other)
    return configs


def register(app: typer.Typer) -> None:
    """Add the ``serve`` command to the ``preqrag`` CLI."""

    @app.command()
    def serve(index_dir: Path = typer.Option(..., "--index", help="Index built by `preqrag index`."),
              config: Optional[Path] = typer.Option(None, "--config", "-c",
                                                    help="preqrag.toml of the default pipeline."),
              host: str = typer.Option("127.0.0.1", help="Address to bind; a non-loopback one needs --api-key-env."),
              port: int = typer.Option(8000, help="TCP port."),
              api_key_env: Optional[str] = typer.Option(
                  None, "--api-key-env", help="Environment variable holding the API key required on /v1 routes."),
              compare: list[str] = typer.Option(
                  [], "--compare", help="Another pipeline to serve (repeatable): NAME=path.toml, or a preset "
                  "NAME (the --config file with that preset); requests pick it with \"pipeline\": NAME and "
                  "the page compares two side by side."),
              name: str = typer.Option("default", "--name", help="Name of the --config pipeline."),
              questions: Optional[Path] = typer.Option(
                  None, "--questions", help="Question JSONL with gold_doc_ids: the page marks gold documents "
                  "of these questions and offers them as examples."),
              max_queue: int = typer.Option(64, min=1, help="Questions waiting before requests get 429."),
              batch_size: Optional[int] = typer.Option(
                  None, min=1, help="Questions per micro-batch (default: the config's run.batch_size)."),
              timeout: float = typer.Option(300.0, min=0.1, help="Seconds a request may wait for its answer (504)."),
              max_question_chars: int = typer.Option(2000, min=1, help="Longer questions get 422."),
              max_body_bytes: int = typer.Option(1_000_000, min=64, help="Larger request bodies get 413."),
              max_batch: int = typer.Option(64, min=1, help="Most questions per /v1/batch request."),
              cors_origin: list[str] = typer.Option(
                  [], "--cors-origin", help="Origin allowed by CORS (repeatable); none = CORS off."),
              log_level: str = typer.Option("info", help="uvicorn log level.")):
        """Serve the pipeline over HTTP (API + web page); every model is loaded once at start.

        The socket is bound first and the models load in the background: /healthz answers
        503 until they are ready, then 200. A pipeline that cannot be built stops the server
        (exit code 2).
        """
        try:
            import uvicorn

            from ...serve.app import ServeSettings, create_app
        except ImportError as e:
            _fail(f'preqrag serve needs FastAPI and uvicorn: pip install -e ".[serve]" ({e})')
        from ..common import open_config as _config, open_pipeline as _pipeline

        from ...models import onnx_runtime

        # a long-running process: memory reserved at start, no per-shape cache growing for hours
        os.environ.setdefault(ONEDNN_CACHE_ENV, ONEDNN_CACHE_SERVE)  # read when torch first uses oneDNN
        onnx_runtime.RESERVE_PEAK_AT_WARM_UP = True
        api_key = _api_key(api_key_env, host)
        if not (index_dir / "manifest.json").is_file():
            _fail(f"{index_dir}: not an index (no manifest.json); build one with `preqrag index`")
        configs = _configs(config, name, compare, _config)
        gold = _gold(questions) if questions is not None else {}

        # Each pipeline is built by preqrag.cli.common.open_pipeline (preflight, open index, warm-up),
        # on the worker thread; they share nothing.
        factories = {n: (lambda c=c: _pipeline(index_dir, c)) for n, c in configs.items()}
        settings = ServeSettings(max_queue=max_queue, batch_size=batch_size, timeout_s=timeout,
                                 max_body_bytes=max_body_bytes, max_question_chars=max_question_chars,
                                 max_batch=max_batch, api_key=api_key, cors_origins=list(cors_origin),
                                 index=str(index_dir))
        logging.basicConfig(level=getattr(logging, log_level.upper(), logging.INFO),
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        server: uvicorn.Server | None = None

        def stop(message: str) -> None:
            typer.echo(f"error: {message}", err=True)
            if server is not None:
                server.should_exit = True

        app = create_app(factories, configs, settings, gold=gold, on_failure=stop)
        server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level=log_level,
                                               timeout_graceful_shutdown=5))
        typer.echo(f"preqrag serve: http://{host if ':' not in host else f'[{host}]'}:{port}/ "
                   f"(pipelines: {', '.join(configs)}; loading models...)", err=True)
        server.run()
        if app.state.worker.state == "failed":
            raise typer.Exit(2)
