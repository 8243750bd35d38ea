"""Errors raised by the Spark runtime."""

from __future__ import annotations

from engine.errors import EngineError


class StreamRuntimeError(EngineError):
    """Root of the errors the Spark runtime raises on purpose; the message names the step."""


class UnsupportedJobError(StreamRuntimeError):
    """The job graph uses something this runtime cannot execute (named in the message)."""


class CommandRejected(StreamRuntimeError):
    """A reconfiguration command is invalid; the message is the reason sent back in the ack."""


_TRACEBACK = "Traceback (most recent call last):"
MAX_SUMMARY = 400


def failure_summary(error: BaseException) -> str:
    """A query's failure in one readable line: the Python exception that ended an epoch
    (``module.Error: message``) when Spark wraps one, else the first line of Spark's message."""
    text = str(error)
    if _TRACEBACK in text:
        tail = text.rsplit(_TRACEBACK, 1)[1].splitlines()
        raised = [line for line in tail if line.strip() and not line[:1].isspace()]
        if raised:
            return _clip(raised[0])
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return _clip(first or type(error).__name__)


def _clip(line: str) -> str:
    line = line.strip()
    return line if len(line) <= MAX_SUMMARY else line[: MAX_SUMMARY - 1] + "…"
