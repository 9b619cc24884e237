"""The command line's sub-commands, one module per area (``register(app)`` adds its commands to
``preqrag``'s typer app, :func:`preqrag.cli.app.main`): classifiers, DoTA topics, evaluation, learned
models, model install, serving, TREC. They sit above everything they call (the layer rule of
docs/architecture.md: nothing below imports a command)."""
