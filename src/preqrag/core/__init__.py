"""The ground layer: typed records (``records``), the stage contracts (``contracts``: one protocol
per slot), the validated configuration and its presets (``config``, ``presets``), file I/O
(``io``), text helpers (``text``: the one sentence splitter), timing and the content-addressed
result caches (``cache``). Imports nothing else of preqrag."""
