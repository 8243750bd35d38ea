"""Errors raised by the Spark runtime, and how a run's failure is told and weighed.

A run's failure is transient (a lost worker, a connection refused, a server restarting), so a
restart from the checkpoint gets past it, or the job's own error (an analysis error, a missing
path, an expression or path the runtime refuses, an ANSI arithmetic error, a schema mismatch),
which recurs on the same data and plan, so a restart only spends time. Unknown failures count
as transient: retrying one that recurs costs a restart with back-off, while failing a run
that would have recovered loses its state.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from engine.errors import EngineError, ProblemsError


class StreamRuntimeError(EngineError):
    """Root of the errors the Spark runtime raises on purpose; the message names the step."""


class UnsupportedJobError(StreamRuntimeError):
    """The job graph uses something this runtime cannot execute (named in the message)."""


class DriverSuperseded(StreamRuntimeError):
    """A later driver of the run has started: this one stops before its next epoch, so a
    driver left behind (a zombie) never writes after its successor started."""


class CommandRejected(StreamRuntimeError):
    """A reconfiguration command is invalid; the message is the reason sent back in the ack."""


class MalformedPlan(StreamRuntimeError):
    """An epoch's logged plan does not read as one; the message names the field. It recurs
    at every start (the run replays its logged plans), so a restart does not get past it."""


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

FailureKind = Literal["transient", "job"]

# Names in an error's text (Spark's error classes, the Python exceptions a failed epoch's
# traceback names) that mark the job's own error: the same data and plan raise it again.
JOB_ERROR_MARKS = (
    # the runtime's own refusals (a path out of the data folder, an unknown format, ...)
    "UnsupportedJobError", "DagValidationError", "EntryTypeError", "MalformedPlan",
    # Spark's analysis: a column, function or table the plan cannot resolve
    "AnalysisException", "UNRESOLVED_COLUMN", "UNRESOLVED_ROUTINE", "DATATYPE_MISMATCH",
    "PARSE_SYNTAX_ERROR", "PATH_NOT_FOUND", "UNABLE_TO_INFER_SCHEMA",
    # ANSI arithmetic and casts
    "DIVIDE_BY_ZERO", "ARITHMETIC_OVERFLOW", "CAST_INVALID_INPUT", "CAST_OVERFLOW",
    "NUMERIC_VALUE_OUT_OF_RANGE", "INVALID_ARRAY_INDEX", "ZeroDivisionError",
    # rows that do not fit the schema they are written to or read with
    "SCHEMA_MISMATCH", "INCOMPATIBLE_DATA", "UndefinedColumn", "UndefinedTable",
    "DatatypeMismatch", "InvalidTextRepresentation", "NumericValueOutOfRange",
)
_JOB_ERROR = re.compile("|".join(re.escape(mark) for mark in JOB_ERROR_MARKS))
# Where Spark shows the SQL text an error arose in: "== SQL (line 1, position 1) ==\n<text>".
_SQL_CONTEXT = re.compile(r"== SQL \(line \d+, position \d+\) ==\n(?P<text>[^\n]+)")
_QUOTED = re.compile(r"'([^'\n]{1,200})'")


@dataclass(frozen=True)
class RunFailure:
    """A run's failure, classified: ``kind`` "job" is not retried; ``operator`` names the
    operator of the job graph the failure arose in, when the error shows it."""

    kind: FailureKind
    cause: str
    operator: str | None = None

    @property
    def retried(self) -> bool:
        """Whether a restart from the checkpoint may get past it."""
        return self.kind == "transient"

    def describe(self) -> str:
        """The cause in one line, naming the operator and whether it will be retried."""
        where = f"operator {self.operator!r}: " if self.operator else ""
        verdict = ("a transient failure, retried" if self.retried
                   else "the job's own error, not retried: it recurs on the same data and plan")
        return f"{where}{self.cause} ({verdict})"


def failure_of(error: BaseException,
               operators: Iterable[Mapping[str, Any]] = ()) -> RunFailure:
    """Classifies ``error`` (a failed query's, or one raised while the run started) and finds
    the operator it arose in among ``operators`` (a job graph document's)."""
    text = f"{type(error).__name__}: {error}"
    is_job = isinstance(error, UnsupportedJobError | ProblemsError) or bool(_JOB_ERROR.search(text))
    return RunFailure(kind="job" if is_job else "transient", cause=failure_summary(error),
                      operator=operator_named(text, list(operators)))


def operator_named(text: str, operators: list[Mapping[str, Any]]) -> str | None:
    """The operator an error's text points at: one whose id it quotes ("operator 'counts'"),
    else the one whose expression holds the SQL text Spark shows the error in, else the only
    operator of a type the text names ("source.files: ...")."""
    ids = {str(op.get("id")) for op in operators}
    quoted = [name for name in _QUOTED.findall(text) if name in ids]
    if quoted:
        return quoted[0]
    for found in _SQL_CONTEXT.finditer(text):
        sql = found.group("text").strip()
        holders = [op for op in operators if sql and sql in _expressions_of(op)]
        if len(holders) == 1:
            return str(holders[0]["id"])
    typed = [op for op in operators if f"{op.get('type')}:" in text]
    return str(typed[0]["id"]) if len(typed) == 1 else None


def _expressions_of(op: Mapping[str, Any]) -> str:
    """Every text of an operator's params, joined: where an expression's SQL text is found."""
    def texts(value: Any) -> Iterable[str]:
        if isinstance(value, str):
            yield value
        elif isinstance(value, Mapping):
            for item in value.values():
                yield from texts(item)
        elif isinstance(value, list | tuple):
            for item in value:
                yield from texts(item)

    return "\n".join(texts(op.get("params") or {}))
