"""One logging setup for every OrbitMQ process, in a RocketMQ-like line format."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

LOG_FORMAT = "%(asctime)s %(levelname)s [%(threadName)s] %(name)s - %(message)s"
_MARK = "_orbitmq_handler"


def setup_logging(level: str = "INFO", file: str | None = None, name: str = "orbitmq") -> logging.Logger:
    """Attach a stderr handler (and a file handler when asked) to the ``name`` logger.

    Calling it again replaces the handlers it added before instead of stacking duplicates,
    so startup code and tests may both call it.
    """
    numeric = logging.getLevelName(str(level).upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}: use DEBUG, INFO, WARNING, ERROR or CRITICAL")
    logger = logging.getLogger(name)
    for handler in [h for h in logger.handlers if getattr(h, _MARK, False)]:
        logger.removeHandler(handler)
        handler.close()
    formatter = logging.Formatter(LOG_FORMAT)
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if file:
        Path(file).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(file, encoding="utf-8"))
    for handler in handlers:
        handler.setFormatter(formatter)
        setattr(handler, _MARK, True)
        logger.addHandler(handler)
    logger.setLevel(numeric)
    return logger
