"""The command line: the ``preqrag`` typer app (``app``), what its commands share (``common``),
the sub-commands (``commands/``) and how an answer is shown in a terminal (``display``).
``python -m preqrag.cli`` and the ``preqrag`` console script (:func:`main`) run the app."""


def main():  # pragma: no cover - console entry point
    """The ``preqrag`` command (``[project.scripts]``); imports the app only when called."""
    from .app import main as run

    return run()
