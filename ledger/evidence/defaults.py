"""The A/B defaults: the CLI shows them in --help, so this module imports nothing."""

DEFAULT_RUNS = 5  # runs per side and concurrency, after one warm-up per side
DEFAULT_CONCURRENCY = (1, 16, 64)
PRIMARY_METRIC = "output_throughput"  # the metric a verdict is about
