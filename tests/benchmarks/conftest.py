"""The benchmarks are run by ``make bench``, never collected by pytest (their smoke
versions are ``tests/core/test_benchmark_smoke.py`` and
``tests/test_benchmark_smoke_services.py``)."""

collect_ignore_glob = ["*.py"]
