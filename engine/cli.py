"""Command line: ``python -m engine validate|plan|etp|scale-out|scale-in|recommend``.

Prints JSON on stdout and exits 0, or prints one line per problem on stderr and exits 2.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

from engine import policies
from engine.dag import output_columns, parse_job_graph, planning_job_graph
from engine.dag.model import JobGraph
from engine.errors import EngineError, ProblemsError
from engine.planner import plan_job
from engine.policies import DEFAULT_THRESHOLD, Rates

EXIT_OK, EXIT_INVALID = 0, 2
T = TypeVar("T")


class InputError(EngineError):
    """A file given on the command line cannot be read or has problems."""

    def __init__(self, lines: Sequence[str]) -> None:
        self.lines = list(lines)
        super().__init__("\n".join(self.lines))


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage mistakes as one line and exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_INVALID, f"{self.prog}: {message} (see --help)\n")


def _load_json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as error:
        raise InputError([f"{path}: cannot read file: {error.strerror or error}"]) from error
    except UnicodeDecodeError as error:
        raise InputError([f"{path}: not UTF-8 text: {error.reason}"]) from error
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError([f"{path}: not valid JSON: {error.msg} at line {error.lineno} "
                          f"column {error.colno}"]) from error
    except RecursionError as error:
        raise InputError([f"{path}: not valid JSON: nested too deeply"]) from error


def _checked(path: str, parse: Callable[[Any], T]) -> T:
    """Load ``path`` and parse it, prefixing each problem with the file name."""
    document = _load_json(path)
    try:
        return parse(document)
    except ProblemsError as error:
        raise InputError([f"{path}: {problem}" for problem in error.problems]) from error


def _graph(path: str) -> JobGraph:
    return _checked(path, parse_job_graph)


def _structure(path: str) -> JobGraph:
    """The graph as the policies read it: its structure checked, its expressions not (that
    starts Spark's SQL parser; ``validate`` does it)."""
    return _checked(path, planning_job_graph)


def _rates(path: str, graph: JobGraph) -> Rates:
    return _checked(path, lambda doc: policies.parse_rates(doc, graph))


def _policy(run: Callable[[], T]) -> T:
    """Run a policy; its refusals become input errors (exit 2)."""
    try:
        return run()
    except ProblemsError as error:
        raise InputError([str(problem) for problem in error.problems]) from error


def cmd_validate(args: argparse.Namespace) -> dict[str, Any]:
    """Validate a DAG document."""
    graph = _graph(args.dag)
    return {"valid": True, "name": graph.name, "key_groups": graph.key_groups,
            "topological_order": list(graph.topological_order()),
            "output_columns": output_columns(graph)}


def cmd_plan(args: argparse.Namespace) -> dict[str, Any]:
    """Physical plan of a DAG document."""
    return plan_job(_graph(args.dag)).to_dict()


def cmd_etp(args: argparse.Namespace) -> dict[str, Any]:
    """ETP and congestion from rates."""
    graph = _structure(args.dag)
    return policies.compute_etp(graph, _rates(args.rates, graph), args.threshold).to_dict()


def cmd_scale_out(args: argparse.Namespace) -> dict[str, Any]:
    """Stela scale-out by N instances."""
    graph = _structure(args.dag)
    rates = _rates(args.rates, graph)
    return _policy(lambda: policies.plan_scale_out(graph, rates, args.instances,
                                                   args.threshold)).to_dict()


def cmd_scale_in(args: argparse.Namespace) -> dict[str, Any]:
    """Stela scale-in of N machines."""
    graph = _structure(args.dag)
    rates = _rates(args.rates, graph)
    placement = _checked(args.placement, lambda doc: policies.parse_placement(doc, graph))
    return _policy(lambda: policies.plan_scale_in(graph, rates, placement, args.machines,
                                                  args.threshold)).to_dict()


def cmd_recommend(args: argparse.Namespace) -> dict[str, Any]:
    """DS2 recommended parallelism."""
    graph = _structure(args.dag)
    rates = _rates(args.rates, graph)
    parallelism = _policy(lambda: policies.recommend_parallelism(graph, rates, args.target_rate))
    return {"parallelism": parallelism}


def _positive_number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text!r}")
    return value


def _threshold(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--threshold", type=_positive_number, default=DEFAULT_THRESHOLD,
                        help="congestion threshold: congested when input > T x processing "
                             "(default %(default)s)")


def _dag_and_rates(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dag", metavar="DAG.json", help="job graph document (DESIGN.md section 4)")
    parser.add_argument("rates", metavar="RATES.json",
                        help='rates: {"<op>": {"input_rate", "processing_rate", "output_rate"}}')


@dataclass(frozen=True)
class _Command:
    """A sub-command reading a DAG document (with ``rates``, a rates file too, and with
    ``threshold`` the congestion threshold), answered by ``run``."""

    name: str
    run: Callable[[argparse.Namespace], dict[str, Any]]
    summary: str
    description: str
    rates: bool = True
    threshold: bool = True
    options: tuple[tuple[str, dict[str, Any]], ...] = ()


_COMMANDS = (
    _Command("validate", cmd_validate, "check a DAG document",
             "Check a DAG document; print its topological order and the columns of every "
             "operator.", rates=False),
    _Command("plan", cmd_plan, "parallel regions, routing, pinned operators",
             "Print the physical plan: parallel regions with their operators, routing, "
             "parallelism and, for operators pinned to 1, the reason.", rates=False),
    _Command("etp", cmd_etp, "ETP and congested operators (Stela)",
             "Effective Throughput Percentage of every operator and the congested operators."),
    _Command("scale-out", cmd_scale_out, "where N new instances should go (Stela)",
             "Give N new instances, one at a time, to the congested operator with the highest "
             "ETP.", options=(("--instances", {"type": int, "required": True, "metavar": "N",
                                               "help": "number of instances to add"}),)),
    _Command("scale-in", cmd_scale_in, "which machines to remove (Stela)",
             "Remove N machines, lowest ETP sum first, spreading their instances round-robin.",
             options=(("--placement", {"required": True, "metavar": "P.json",
                                       "help": '{"<machine>": ["<op>", ...]} one entry per '
                                               "instance"}),
                      ("--machines", {"type": int, "required": True, "metavar": "N",
                                      "help": "number of machines to remove"}))),
    _Command("recommend", cmd_recommend, "DS2 parallelism for a target rate",
             "DS2: parallelism of every non-source operator for sources emitting R rows/s.",
             threshold=False,
             options=(("--target-rate", {"type": float, "default": None, "metavar": "R",
                                         "help": "rows/s per source (default: its measured "
                                                 "output_rate)"}),)),
)


def _add_commands(commands: Any) -> None:
    for spec in _COMMANDS:
        command = commands.add_parser(spec.name, help=spec.summary, description=spec.description)
        if spec.rates:
            _dag_and_rates(command)
        else:
            command.add_argument("dag", metavar="DAG.json", help="job graph document")
        for flag, settings in spec.options:
            command.add_argument(flag, **settings)
        if spec.threshold and spec.rates:
            _threshold(command)
        command.set_defaults(run=spec.run)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``python -m engine``."""
    parser = _Parser(prog="python -m engine",
                     description="Check, plan and size streamscale jobs from files: no "
                                 "database, no Spark (except `run`). Prints JSON on stdout "
                                 "(exit 0) or one line per problem on stderr (exit 2).")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True
    _add_commands(commands)
    # Listed for --help only; main() hands `run` to the Spark runtime before parsing.
    commands.add_parser("run", add_help=False,
                        help="run a job on Spark: run DAG.json --checkpoint DIR [--master URL]")
    commands.add_parser("produce", add_help=False,
                        help="write generator events to a Redis stream: produce REDIS_URL "
                             "--stream NAME --keys K (--count N | --rate R)")
    commands.add_parser("class-archive", add_help=False,
                        help="make the JVM class archive Spark drivers start from, unless made")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["run"]:
        # Only this command needs PySpark; the others stay importable without it.
        from engine.runtime.cli import main_run

        return main_run(arguments[1:])
    if arguments[:1] == ["produce"]:
        from engine.runtime.io.broker.produce_cli import main_produce

        return main_produce(arguments[1:])
    if arguments[:1] == ["class-archive"]:
        from engine.runtime.cli import main_class_archive

        return main_class_archive()
    args = build_parser().parse_args(arguments)
    try:
        result = args.run(args)
    except InputError as error:
        _fail(error.lines)
        return EXIT_INVALID
    except EngineError as error:
        _fail(str(error).splitlines())
        return EXIT_INVALID
    except Exception as error:  # the edge: never show a traceback to the user
        _fail([f"error: {type(error).__name__}: {error}"])
        return EXIT_INVALID
    try:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:  # the reader (e.g. head) left early; that is not an error
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keeps the interpreter's exit quiet
    return EXIT_OK


def _fail(lines: Sequence[str]) -> None:
    for line in lines:
        sys.stderr.write(" ".join(str(line).split("\n")) + "\n")
