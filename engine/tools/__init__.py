"""Tools on top of the engine: the ``python -m engine`` command line and the benchmark."""
