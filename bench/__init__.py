"""The benchmark studies (bench/NAME.py, each with ``run(argv)``) and their shared harness
(bench/harness.py); ``python -m bench`` lists the studies, ``python -m bench NAME [args]`` runs one."""
