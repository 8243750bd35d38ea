"""Exceptions of the engine: one root, and problem-carrying subclasses for bad inputs."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One problem found in an input document.

    ``where`` names the place (``"operator 'counts'"``, ``"edge views -> counts"``,
    ``"document"``, ``"rates of operator 'x'"``); ``message`` says what is wrong.
    """

    where: str
    message: str

    def __str__(self) -> str:
        # One line per problem, even when the message quotes user text with newlines.
        return f"{self.where}: {self.message}".replace("\r", "\\r").replace("\n", "\\n")


class EngineError(Exception):
    """Root of every error the engine raises on purpose."""


class ProblemsError(EngineError):
    """An input was rejected; carries every problem found, not just the first."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems: list[Problem] = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems) or "invalid input")


class DagValidationError(ProblemsError):
    """A job graph (DAG) document is invalid."""


class ValidationBudgetExceeded(DagValidationError):
    """Checking a document took longer than its budget; parsed expressions are remembered,
    so the same document sent again continues where this check stopped."""


class RatesError(ProblemsError):
    """A rates document is invalid or does not match its job graph."""


class PlacementError(ProblemsError):
    """A placement document (machine -> operator instances) is invalid."""


class PolicyError(ProblemsError):
    """A policy was asked for something it cannot do (e.g. remove every machine)."""


class MappingError(EngineError):
    """A key-group assignment or assignment diff is inconsistent."""
