"""The command line: the ``preqrag`` typer app (``app``), what its commands share
(``common``), the sub-commands (``commands/``) and how an answer is shown in a terminal
(``display``). ``python -m preqrag.cli`` runs the app."""
