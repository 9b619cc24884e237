"""``python -m preqrag.cli``: the ``preqrag`` command."""

from . import main

if __name__ == "__main__":  # pragma: no cover
    main()
