"""structlog set-up: a readable console renderer, or JSON lines (``--log-format json``), on stderr."""

from __future__ import annotations

import logging
import sys

import structlog


def configure(fmt: str = "console", level: str = "warning") -> None:
    renderer = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=False,
    )


def _stderr_logger(*args: object) -> structlog.PrintLogger:
    """A logger writing to ``sys.stderr`` as it is when the event is logged, not when logging was
    configured (so a replaced or closed stream, as under pytest's capture, is never written to)."""
    return structlog.PrintLogger(file=sys.stderr)


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    return structlog.get_logger(name)
