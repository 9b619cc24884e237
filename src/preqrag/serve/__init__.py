"""``preqrag serve``: the pipeline behind an HTTP API and a web page.

:mod:`.worker` (one thread owns the pipelines and answers queued questions in micro-batches),
:mod:`.app` (the FastAPI app: ``/v1/answer``, ``/v1/retrieve``, ``/v1/batch``, ``/v1/config``,
``/healthz``, the page), :mod:`preqrag.cli.commands.serve` (the ``serve`` command). Needs FastAPI and uvicorn
(``pip install -e ".[serve]"``); importing this package does not.
"""
