"""Errors raised by the Spark runtime."""

from __future__ import annotations

from engine.errors import EngineError


class StreamRuntimeError(EngineError):
    """Root of the errors the Spark runtime raises on purpose; the message names the step."""


class UnsupportedJobError(StreamRuntimeError):
    """The job graph uses something this runtime cannot execute (named in the message)."""


class CommandRejected(StreamRuntimeError):
    """A reconfiguration command is invalid; the message is the reason sent back in the ack."""
