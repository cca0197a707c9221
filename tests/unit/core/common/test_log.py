"""setup_logging: format, file output, idempotence."""

from __future__ import annotations

import logging
import re

import pytest

from orbitmq.common.log import setup_logging


def test_setup_logging_is_idempotent_and_writes_file(tmp_path):
    log_file = tmp_path / "logs" / "broker.log"
    name = "orbitmq.test_log_a"
    logger = setup_logging("debug", file=str(log_file), name=name)
    setup_logging("DEBUG", file=str(log_file), name=name)
    assert len(logger.handlers) == 2  # one stderr + one file, not doubled
    assert logger.level == logging.DEBUG
    logging.getLogger(name + ".child").info("hello %s", "world")
    for handler in logger.handlers:
        handler.flush()
    line = log_file.read_text(encoding="utf-8").strip()
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO \[\S+\] orbitmq\.test_log_a\.child - hello world", line
    ), line
    setup_logging("WARNING", name=name)
    assert len(logger.handlers) == 1 and logger.level == logging.WARNING
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()


def test_setup_logging_rejects_bad_level():
    with pytest.raises(ValueError, match="unknown log level"):
        setup_logging("LOUD", name="orbitmq.test_log_b")
