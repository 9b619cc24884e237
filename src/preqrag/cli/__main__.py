"""``python -m preqrag.cli``: the ``preqrag`` command."""

from .app import main

main()
