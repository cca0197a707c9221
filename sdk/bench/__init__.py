"""``orbitmq bench``: benchmarks, one sub-command per target (store, producer, ...)."""
