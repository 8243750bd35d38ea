"""Bounds on what an expression may build: the arguments that size a value, and the regular
expressions it matches with.

A function such as ``repeat(s, n)`` or ``printf('%1000000000s', s)`` is deterministic and
harmless for small sizes, but one row with a large size makes an executor build gigabytes (or
run out of memory) in every epoch, and a regular expression with nested quantifiers, such as
``(a+)+b``, makes Java's backtracking matcher take exponential time on a short input. Such
arguments must be constants within a bound, so the check sees what will run.

>>> from engine.dag.expressions import expression_problems
>>> expression_problems("repeat('ab', 3)")
[]
>>> expression_problems("repeat('ab', 1000000)")
['repeat: its count is 1000000, at most 10000']
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # expressions imports this module
    from engine.dag.expressions import ExpressionNode as Node

MAX_BUILT_LENGTH = 10_000
"""The largest count or length a function may be asked to build (characters or elements)."""
MAX_DECIMALS = 100
MAX_REGEX_REPEAT = 1000
"""The largest count of a bounded repetition (``x{n,m}``) in a regular expression."""


@dataclass(frozen=True)
class _Sized:
    """Argument ``index`` of a function sizes its value: ``what`` it is, and its bound."""

    index: int
    what: str
    limit: int


SIZED_ARGUMENTS: dict[str, _Sized] = {
    "repeat": _Sized(1, "count", MAX_BUILT_LENGTH),
    "space": _Sized(0, "count", MAX_BUILT_LENGTH),
    "array_repeat": _Sized(1, "count", MAX_BUILT_LENGTH),
    "lpad": _Sized(1, "length", MAX_BUILT_LENGTH),
    "rpad": _Sized(1, "length", MAX_BUILT_LENGTH),
    # A position past the end pads the array with nulls up to it.
    "array_insert": _Sized(1, "position", MAX_BUILT_LENGTH),
}
FORMATTERS = ("printf", "format_string")
# The functions whose argument 1 is a regular expression (Java's, backtracking).
REGEX_ARGUMENT = frozenset({
    "rlike", "regexp", "regexp_like", "regexp_extract", "regexp_extract_all", "regexp_replace",
    "regexp_count", "regexp_instr", "regexp_substr", "split",
})


def bound_problems(tree: Sequence[Node]) -> list[str]:
    """What in ``tree`` (pre-order) could build an unbounded value or match without end."""
    problems: list[str] = []
    for index, arguments in _calls(tree):
        node = tree[index]
        function = node.name[0].lower() if node.kind == "UnresolvedFunction" else "rlike"
        problem = _call_problem(function, [tree_value(tree, a) for a in arguments], arguments)
        if problem is not None:
            problems.append(problem)
    return problems


def _calls(tree: Sequence[Node]) -> Iterator[tuple[int, list[int]]]:
    """Each function call (and ``x RLIKE p``) with the positions of its arguments."""
    sizes = _subtree_sizes(tree)
    for index, node in enumerate(tree):
        if node.kind == "RLike" or (node.kind == "UnresolvedFunction" and len(node.name) == 1):
            arguments, at = [], index + 1
            for _ in range(node.children):
                arguments.append(at)
                at += sizes[at]
            yield index, arguments


def _subtree_sizes(tree: Sequence[Node]) -> list[int]:
    sizes = [0] * len(tree)
    stack: list[int] = []
    for index in range(len(tree) - 1, -1, -1):
        size = 1 + sum(stack.pop() for _ in range(tree[index].children) if stack)
        sizes[index] = size
        stack.append(size)
    return sizes


def tree_value(tree: Sequence[Node], index: int) -> str | None:
    """The constant at ``index`` as text (a literal, or minus one), or None if not constant."""
    node = tree[index]
    if node.kind == "Literal":
        return node.value
    if node.kind == "UnaryMinus" and index + 1 < len(tree) and tree[index + 1].kind == "Literal":
        value = tree[index + 1].value
        return None if value is None else f"-{value}"
    return None


def _call_problem(function: str, values: list[str | None], arguments: list[int]) -> str | None:
    sized = SIZED_ARGUMENTS.get(function)
    if sized is not None and sized.index < len(arguments):
        return _size_problem(function, sized, values[sized.index])
    if function in FORMATTERS and values:
        return _format_problem(function, values[0])
    if function == "format_number" and len(values) > 1:
        return _decimals_problem(values[1])
    if function in REGEX_ARGUMENT and len(values) > 1:
        return regex_problem(function, values[1])
    return None


def _size_problem(function: str, sized: _Sized, value: str | None) -> str | None:
    number = _whole(value)
    if number is None:
        return (f"{function}: its {sized.what} must be a constant whole number (at most "
                f"{sized.limit}), not computed per row")
    if abs(number) > sized.limit:
        return f"{function}: its {sized.what} is {number}, at most {sized.limit}"
    return None


def _whole(value: str | None) -> int | None:
    if value is None or not re.fullmatch(r"-?\d{1,30}", value.strip()):
        return None
    return int(value)


# A conversion of java.util.Formatter: %[index$][flags][width][.precision]conversion
_FORMAT_SPEC = re.compile(r"%(?:\d+\$)?[-#+ 0,(<]*(\d+)?(?:\.(\d+))?[a-zA-Z%]")


def _format_problem(function: str, value: str | None) -> str | None:
    if value is None:
        return f"{function}: its format must be a constant string, not computed per row"
    for match in _FORMAT_SPEC.finditer(value):
        for part, what in ((match.group(1), "width"), (match.group(2), "precision")):
            if part is not None and int(part) > MAX_BUILT_LENGTH:
                return (f"{function}: the {what} {int(part)} in its format "
                        f"{match.group(0)!r} is over {MAX_BUILT_LENGTH}")
    return None


def _decimals_problem(value: str | None) -> str | None:
    if value is None:
        return "format_number: its decimals (or format) must be a constant, not computed per row"
    number = _whole(value)
    if number is not None and number > MAX_DECIMALS:
        return f"format_number: its decimals are {number}, at most {MAX_DECIMALS}"
    return None


def regex_problem(function: str, pattern: str | None) -> str | None:
    """Why ``pattern`` may not be matched by ``function``: not a constant, or a shape that
    can make a backtracking matcher take exponential time."""
    if pattern is None:
        return f"{function}: its regular expression must be a constant string, not computed per row"
    why = _catastrophic(pattern)
    if why is None:
        return None
    return f"{function}: the regular expression {_short(pattern)!r} {why}"


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


MAX_OUTER_REPEAT = 10
"""A group holding a variable repeat may itself repeat at most this many times (``{n,m}``)."""


@dataclass
class _Group:
    varies: bool = False  # holds a quantifier whose count varies (*, +, ?, {n,}, {n,m})


_QUANTIFIER = re.compile(r"\*|\+|\?|\{(\d+)(,(\d*))?\}")
# What follows "(" in a group that is not a plain one: (?:, (?=, (?!, (?<=, (?<!, (?>,
# (?<name>, and inline flags such as (?i) or (?i:
_GROUP_CONSTRUCT = re.compile(r"\(\?(?:<[A-Za-z][A-Za-z0-9]*>|<=|<!|[:=!>]|[a-zA-Z-]*[:)])")


def _catastrophic(pattern: str) -> str | None:
    """Why the pattern can backtrack without bound (None: it cannot, as far as shapes go):
    a group holding a variable repeat that itself repeats without a small bound (nested
    quantifiers), a back-reference, or a repetition count over MAX_REGEX_REPEAT."""
    stack = [_Group()]
    i, closed = 0, None  # closed: the group that just ended, if the next token quantifies it
    while i < len(pattern):
        quantifier = _QUANTIFIER.match(pattern, i) if i > 0 else None
        if quantifier is not None:
            low, most = _counts(quantifier)
            if max(low, most or 0) > MAX_REGEX_REPEAT:
                return f"repeats {max(low, most or 0)} times, at most {MAX_REGEX_REPEAT}"
            if closed is not None and closed.varies and (most is None or most > MAX_OUTER_REPEAT):
                return ("nests quantifiers (a repeated group holds a repeat): it can take "
                        "exponential time; write it without the inner or the outer repeat")
            stack[-1].varies |= most is None or most > low
            i, closed = _after_quantifier(pattern, quantifier.end()), None
            continue
        i, closed, why = _step(pattern, i, stack)
        if why is not None:
            return why
    return None


def _step(pattern: str, i: int, stack: list[_Group]) -> tuple[int, _Group | None, str | None]:
    """Past the token at ``i`` (not a quantifier): the next position, the group it closed."""
    char = pattern[i]
    if char == "\\":
        if pattern[i + 1:i + 2] in tuple("123456789k"):
            return i, None, "has a back-reference: matching it can take exponential time"
        return i + 2, None, None
    if char == "[":
        return _class_end(pattern, i), None, None
    if char == "(":
        construct = _GROUP_CONSTRUCT.match(pattern, i)
        if construct is not None and construct.group(0).endswith(")"):
            return construct.end(), None, None  # inline flags, such as (?i)
        stack.append(_Group())
        return (construct.end() if construct is not None else i + 1), None, None
    if char == ")" and len(stack) > 1:
        closed = stack.pop()
        stack[-1].varies |= closed.varies
        return i + 1, closed, None
    return i + 1, None, None


def _counts(quantifier: re.Match[str]) -> tuple[int, int | None]:
    """The least and most times a quantifier repeats its atom (None: no most)."""
    text = quantifier.group(0)
    if text in ("*", "+", "?"):
        return (0 if text != "+" else 1), (1 if text == "?" else None)
    low = int(quantifier.group(1))
    if quantifier.group(2) is None:
        return low, low
    return low, int(quantifier.group(3)) if quantifier.group(3) else None


def _after_quantifier(pattern: str, at: int) -> int:
    return at + 1 if pattern[at:at + 1] in ("?", "+") else at  # lazy or possessive


def _class_end(pattern: str, start: int) -> int:
    """The position after the character class opened at ``start`` (nested classes too)."""
    depth, i = 0, start
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if char == "[":
            depth += 1
        elif char == "]" and i > start + 1 + (pattern[start + 1:start + 2] == "^"):
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return i
