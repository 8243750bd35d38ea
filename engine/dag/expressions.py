"""Spark SQL expressions of a job, checked before anything runs.

An expression is parsed by Spark's own parser (so the check sees exactly what Spark will
run) and its tree is checked against allow-lists: of tree node kinds (no subqueries, no
window clauses, no parameters) and of functions, which must be deterministic and free of
side effects. A replayed epoch must produce the same rows (exactly once), and a job must
never reach the host it runs on (``java_method``, ``reflect``, file readers...).

>>> expression_problems("event_type = 'view'", columns={"event_type"})
[]
>>> expression_problems("java_method('java.lang.System', 'getenv', 'X')")
["function 'java_method' is not allowed: it reaches the host (calls Java methods)"]

The parser itself needs a JVM and lives in the runtime (``engine.runtime.spark.sql_parser``);
the engine's package hands this module a loader for it (``use_parser_loader``), called on first
use, so that importing the engine loads no Spark and this layer imports nothing of the runtime.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from functools import lru_cache

from engine.dag.expression_bounds import bound_problems
from engine.errors import EngineError

MAX_EXPRESSION_LENGTH = 4000


@dataclass(frozen=True)
class ExpressionNode:
    """One node of a parsed expression tree, in pre-order: Catalyst's class name (without
    package), its number of children, its name parts (function or column names) and, for a
    literal, its value as text (None for NULL)."""

    kind: str
    children: int
    name: tuple[str, ...] = ()
    value: str | None = None


class ExpressionSyntaxError(ValueError):
    """Spark's parser refused the text; the message says where."""


class ExpressionParserUnavailable(EngineError):
    """Spark's parser could not be reached (no Java?), so nothing can be validated."""


Parser = Callable[[str], tuple[ExpressionNode, ...]]

_parser: Parser | None = None
_loader: Callable[[], Parser] | None = None
_warm = False


def use_parser_loader(loader: Callable[[], Parser]) -> None:
    """How to get Spark's parser when an expression is first checked."""
    global _loader
    _loader = loader


def set_expression_parser(parser: Parser | None) -> None:
    """Use another parser (None: Spark's, loaded on first use)."""
    global _parser, _warm
    _parser = parser
    _warm = False
    _parsed.cache_clear()


def _spark_parser() -> Parser:
    global _parser
    if _parser is None:
        if _loader is None:
            raise ExpressionParserUnavailable("no expression parser: none was installed")
        _parser = _loader()
    return _parser


# Parsed once to warm the parser up: its first trees of comparisons, literals, functions,
# CASE and lambdas each load more of Spark's parser (about 1.4 s for a comparison after a
# bare literal, measured), so one expression with all of them leaves ~5 ms per expression.
_WARM_UP_EXPRESSION = (
    "CASE WHEN upper(a) = 'x' AND b > 1.5 OR c IN (1, 2) "
    "THEN transform(array(b), x -> x + 1) ELSE NULL END"
)


def warm_up_parser() -> None:
    """Start the parser now (its JVM takes a few seconds the first time in a process, and
    its first trees of each kind more)."""
    global _warm
    _warm = isinstance(_parsed(_WARM_UP_EXPRESSION), tuple)


def parser_warm() -> bool:
    """Whether ``warm_up_parser`` has run here: an expression then takes ~5 ms to check the
    first time and nothing after (cached), unless it has a shape the warm-up lacked."""
    return _warm


@lru_cache(maxsize=4096)
def _parsed(text: str) -> tuple[ExpressionNode, ...] | str:
    """The tree of ``text``, or the parser's message; cached since editors re-validate
    the same document on every change."""
    try:
        return _spark_parser()(text)
    except ExpressionSyntaxError as error:
        return str(error)


def expression_problems(text: str, columns: Collection[str] | None = None) -> list[str]:
    """Why ``text`` may not be used as an expression (empty list: it may).

    ``columns``: the input's columns, to resolve column references against; None when the
    input's columns are unknown (then only the functions and constructs are checked).
    """
    if not text.strip():
        return ["expression is empty"]
    if len(text) > MAX_EXPRESSION_LENGTH:
        return [f"expression is {len(text)} characters long (at most {MAX_EXPRESSION_LENGTH})"]
    if "\x00" in text:
        return ["expression contains a NUL character"]
    tree = _parsed(text)
    if isinstance(tree, str):
        return [tree]
    problems: list[str] = []
    dangling = _dangling_word(text, tree)
    if dangling is not None:
        return [f"the expression is incomplete: nothing follows {dangling}"]
    if tree and tree[0].kind == "LambdaFunction":
        problems.append("a lambda (x -> ...) may only be an argument of a function")
    for node in tree:
        problem = _node_problem(node, columns)
        if problem is not None and problem not in problems:
            problems.append(problem)
    if not problems:  # sizes are read from calls that are allowed at all
        problems += bound_problems(tree)
    return problems


# Words that need something after them; Spark's parser reads one left at the end of an
# expression as a column alias ("x > 1 AND" is "x > 1 AS AND"), which would be refused as AS.
_CONTINUED_BY = frozenset({"AND", "OR", "NOT", "IS", "IN", "LIKE", "ILIKE", "RLIKE", "BETWEEN",
                           "CASE", "WHEN", "THEN", "ELSE", "DIV"})


def _dangling_word(text: str, tree: tuple[ExpressionNode, ...]) -> str | None:
    if not any(node.kind in ("Alias", "MultiAlias") for node in tree):
        return None
    words = text.rstrip().split()
    last = words[-1] if words else ""
    return repr(last) if last.upper() in _CONTINUED_BY else None


def unknown_columns(text: str, columns: Collection[str]) -> list[str]:
    """Columns ``text`` refers to that are not in ``columns`` (none if it does not parse)."""
    tree = _parsed(text) if text.strip() and len(text) <= MAX_EXPRESSION_LENGTH else ()
    if isinstance(tree, str):
        return []
    missing = [node.name[0] for node in tree
               if node.kind == "UnresolvedAttribute" and node.name[0] not in columns
               and not (len(node.name) == 1 and node.name[0].lower() in REFUSED_FUNCTIONS)]
    return list(dict.fromkeys(missing))


def _node_problem(node: ExpressionNode, columns: Collection[str] | None) -> str | None:
    if node.kind == "UnresolvedFunction":
        return function_problem(node.name)
    if node.kind == "UnresolvedAttribute":
        return _column_problem(node.name, columns)
    if node.kind in ALLOWED_NODES:
        return None
    return REFUSED_NODES.get(node.kind, f"{node.kind} is not allowed in a job's expressions")


def function_problem(name: tuple[str, ...]) -> str | None:
    """Why a function may not be called, or None if it is on the allow-list."""
    if len(name) != 1:
        return (f"function {'.'.join(name)!r} is not allowed: call built-in functions by "
                "their plain name")
    function = name[0].lower()
    if function in ALLOWED_FUNCTIONS:
        return None
    reason = REFUSED_FUNCTIONS.get(function, "only deterministic, side-effect-free built-in "
                                             "functions may be used")
    return f"function {function!r} is not allowed: {reason}"


def _column_problem(name: tuple[str, ...], columns: Collection[str] | None) -> str | None:
    column = name[0]
    if columns is not None and column in columns:
        return None
    if len(name) == 1 and column.lower() in REFUSED_FUNCTIONS:
        # Spark reads a bare current_date, user... as a call when no column has that name.
        return f"function {column.lower()!r} is not allowed: {REFUSED_FUNCTIONS[column.lower()]}"
    if columns is None:
        return None
    return unknown_column_message(column, columns)


def unknown_column_message(column: str, columns: Collection[str]) -> str:
    """The message for a reference to a column the input does not have."""
    return f"unknown column {column!r} (input columns: {', '.join(sorted(columns)) or 'none'})"


_NON_DETERMINISTIC = "it is not deterministic (a replayed epoch must give the same rows)"
_HOST = "it reaches the host"
REFUSED_FUNCTIONS: dict[str, str] = {
    **dict.fromkeys(
        ("rand", "randn", "random", "uuid", "shuffle", "randstr", "uniform",
         "monotonically_increasing_id", "spark_partition_id", "now", "localtimestamp",
         "current_date", "current_timestamp", "current_time", "curdate", "unix_timestamp"),
        _NON_DETERMINISTIC),
    **dict.fromkeys(
        ("current_user", "user", "session_user", "current_database", "current_schema",
         "current_catalog", "current_timezone", "version", "input_file_name",
         "input_file_block_start", "input_file_block_length"),
        "it reveals the host or the files a job reads"),
    "java_method": f"{_HOST} (calls Java methods)",
    "reflect": f"{_HOST} (calls Java methods)",
    "try_reflect": f"{_HOST} (calls Java methods)",
    "raise_error": "it fails the run on purpose",
    "assert_true": "it fails the run on purpose",
    **dict.fromkeys(("read_files", "xpath", "from_xml", "schema_of_xml"),
                    f"{_HOST} (reads files or documents)"),
    "sequence": "it can build values of any size",
    **dict.fromkeys(("inline", "inline_outer", "explode", "explode_outer", "posexplode",
                     "posexplode_outer", "stack"),
                    "it makes rows, not a value: an expression gives one value per row"),
    **dict.fromkeys(("count", "sum", "min", "max", "avg", "mean", "first", "last",
                     "collect_list", "collect_set", "row_number", "rank", "lag", "lead"),
                    "aggregates belong in a window_aggregate's `aggregates`"),
}

REFUSED_NODES: dict[str, str] = {
    **dict.fromkeys(("ScalarSubquery", "ListQuery", "InSubquery", "Exists", "LateralSubquery"),
                    "subqueries are not allowed: a job reads only its inputs"),
    "WindowExpression": "window functions (OVER) are not allowed",
    "UnresolvedStar": "* is not allowed: name the columns",
    **dict.fromkeys(("Alias", "MultiAlias"),
                    "AS is not allowed (a name after an expression reads as AS name): an "
                    "expression gives a value, and a map names its columns by its keys"),
    **dict.fromkeys(("PosParameter", "NamedParameter"), "parameters (? or :name) are not allowed"),
    "ExpressionWithUnresolvedIdentifier": "IDENTIFIER(...) is not allowed: name the column",
}

ALLOWED_NODES = frozenset({
    "Literal", "UnresolvedExtractValue", "UnresolvedNamedLambdaVariable", "LambdaFunction",
    "Add", "Subtract", "Multiply", "Divide", "Remainder", "IntegralDivide", "UnaryMinus",
    "UnaryPositive", "EqualTo", "EqualNullSafe", "LessThan", "LessThanOrEqual", "GreaterThan",
    "GreaterThanOrEqual", "Not", "And", "Or", "In", "IsNull", "IsNotNull", "IsUnknown",
    "IsNotUnknown", "Like", "ILike", "RLike", "LikeAny", "LikeAll", "NotLikeAny", "NotLikeAll",
    "Cast", "CaseWhen", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot", "Concat",
    "CreateNamedStruct", "StringLocate", "Overlay", "Collate", "UnresolvedCollation",
})

ALLOWED_FUNCTIONS = frozenset("""
abs acos acosh add_months and array array_append array_compact array_contains array_distinct
array_except array_insert array_intersect array_join array_max array_min array_position
array_prepend array_remove array_size array_sort array_union arrays_overlap arrays_zip ascii
asin asinh atan atan2 atanh base64 between bigint bin binary bit_count bit_get bit_length
boolean bround btrim cardinality cast cbrt ceil ceiling char char_length character_length chr
coalesce concat concat_ws contains conv convert_timezone cos cosh cot crc32 csc date
date_add date_diff date_format date_from_unix_date date_part date_sub date_trunc dateadd
datediff datepart day dayname dayofmonth dayofweek dayofyear decimal decode degrees double
e element_at elt encode endswith equal_null exists exp expm1 extract factorial filter
find_in_set float floor forall format_number format_string from_json from_unixtime
from_utc_timestamp get get_json_object greatest hash hex hour hypot if ifnull ilike in initcap
instr int isnan isnotnull isnull json_array_length json_object_keys last_day lcase
least left len length levenshtein like ln locate log log10 log1p log2 lower lpad ltrim
make_date make_interval make_timestamp make_dt_interval make_ym_interval map map_concat
map_contains_key map_entries map_filter map_from_arrays map_from_entries map_keys map_values
map_zip_with mask md5 minute mod month monthname months_between named_struct nanvl
negative next_day not nullif nullifzero nvl nvl2 octet_length or overlay parse_url pi pmod
position positive pow power printf quarter radians regexp regexp_count regexp_extract
repeat array_repeat space rpad
regexp_extract_all regexp_instr regexp_like regexp_replace regexp_substr replace reverse
right rint rlike round rtrim sec second sha sha1 sha2 shiftleft shiftright
shiftrightunsigned sign signum sin sinh size slice smallint sort_array soundex split
split_part sqrt startswith struct substr substring substring_index tan tanh timestamp
timestamp_micros timestamp_millis timestamp_seconds tinyint to_char to_date to_json
to_number to_timestamp to_unix_timestamp to_utc_timestamp transform transform_keys
transform_values translate trim trunc try_add try_divide try_element_at try_multiply
try_subtract try_to_number try_to_timestamp typeof ucase unbase64 unhex unix_date
unix_micros unix_millis unix_seconds upper url_decode url_encode weekday weekofyear
when width_bucket xxhash64 year zeroifnull zip_with
""".split())
"""Built-in functions a job may call: deterministic, no side effects, bounded output (those
whose output an argument sizes are bounded by ``engine.dag.expression_bounds``)."""
