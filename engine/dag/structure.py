"""Structural checks of a job graph: cycles, roles, input counts, reachability, limits."""

from __future__ import annotations

from engine.dag.catalog import OPERATOR_TYPES
from engine.dag.model import JobGraph
from engine.dag.state import pinned_reason
from engine.errors import Problem


def cycle_problems(graph: JobGraph) -> list[Problem]:
    """One problem per cycle (strongly connected component), naming its operators in order."""
    problems = []
    for component in _cyclic_components(graph):
        path = _cycle_path(graph, component)
        problems.append(Problem(f"operator {path[0]!r}",
                                "is on a cycle: " + " -> ".join([*path, path[0]])))
    return problems


def _cyclic_components(graph: JobGraph) -> list[list[str]]:
    """Strongly connected components with more than one operator, in document order
    (Tarjan's algorithm, iterative: linear in operators + edges, no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for root in graph.operator_ids():
        if root in index:
            continue
        work = [(root, iter(graph.children(root)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph.children(child))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    order = {op_id: i for i, op_id in enumerate(graph.operator_ids())}
    components = [sorted(c, key=order.__getitem__) for c in found]
    return sorted(components, key=lambda c: order[c[0]])


def _descendants(graph: JobGraph, starts: list[str] | tuple[str, ...]) -> set[str]:
    """Operators reachable from ``starts`` by one or more edges."""
    found: set[str] = set()
    pending = [child for start in starts for child in graph.children(start)]
    while pending:
        node = pending.pop()
        if node not in found:
            found.add(node)
            pending.extend(graph.children(node))
    return found


def _cycle_path(graph: JobGraph, component: list[str]) -> list[str]:
    """A simple cycle inside a strongly connected component, from its first operator."""
    members = set(component)
    start = next(op_id for op_id in graph.operator_ids() if op_id in members)
    parent: dict[str, str] = {}
    frontier = [start]
    while frontier:  # breadth-first search back to ``start`` gives a shortest cycle
        next_frontier = []
        for node in frontier:
            for child in graph.children(node):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    return list(reversed(path))
                if child in members and child not in parent and child != start:
                    parent[child] = node
                    next_frontier.append(child)
        frontier = next_frontier
    return [start]


def role_problems(graph: JobGraph) -> list[Problem]:
    """Sources with inputs, sinks with outputs, operators without inputs, bad input counts."""
    problems = []
    for op in graph.operators:
        op_type = OPERATOR_TYPES.get(op.type)
        if op_type is None:
            continue
        where, inputs = f"operator {op.id!r}", len(graph.parents(op.id))
        if op_type.role == "source" and inputs:
            problems.append(Problem(where, f"source type {op.type} cannot have inputs "
                                           f"(has {', '.join(graph.parents(op.id))})"))
        if op_type.role == "sink" and graph.children(op.id):
            problems.append(Problem(where, f"sink type {op.type} cannot have outputs "
                                           f"(feeds {', '.join(graph.children(op.id))})"))
        if op_type.role != "source" and inputs == 0:
            problems.append(Problem(where, "has no inputs (only sources may have none)"))
        elif op_type.inputs and op_type.role != "source" and inputs != op_type.inputs:
            problems.append(Problem(where, f"{op.type} needs exactly {op_type.inputs} inputs, "
                                           f"has {inputs}"))
    return problems


def reachability_problems(graph: JobGraph) -> list[Problem]:
    """Operators whose rows never reach a sink (dangling branches)."""
    sinks = {op.id for op in graph.operators
             if op.type in OPERATOR_TYPES and OPERATOR_TYPES[op.type].role == "sink"}
    reaches = _reaching(sinks, graph)
    problems = []
    for op in graph.operators:
        if op.id in reaches or op.type not in OPERATOR_TYPES:
            continue
        if not graph.children(op.id):
            message = "has no outputs and is not a sink: its rows reach no sink"
        else:
            message = "its output reaches no sink"
        problems.append(Problem(f"operator {op.id!r}", message))
    return problems


def source_reachability_problems(graph: JobGraph) -> list[Problem]:
    """Operators with inputs that no source feeds (e.g. an unreachable sink behind a
    cycle or behind an operator without inputs)."""
    sources = {op.id for op in graph.operators
               if op.type in OPERATOR_TYPES and OPERATOR_TYPES[op.type].role == "source"}
    fed = sources | _descendants(graph, tuple(sources))
    problems = []
    for op in graph.operators:
        if op.id not in fed and graph.parents(op.id) and op.type in OPERATOR_TYPES:
            what = "sink" if OPERATOR_TYPES[op.type].role == "sink" else "operator"
            problems.append(Problem(f"operator {op.id!r}",
                                    f"unreachable {what}: no source feeds it"))
    return problems


def _reaching(targets: set[str], graph: JobGraph) -> set[str]:
    """``targets`` and every operator with a path to one of them."""
    reached = set(targets)
    pending = list(targets)
    while pending:
        for parent in graph.parents(pending.pop()):
            if parent not in reached:
                reached.add(parent)
                pending.append(parent)
    return reached


def parallelism_problems(graph: JobGraph) -> list[Problem]:
    """Parallelism above 1 on operators that must run as one instance."""
    problems = []
    for op in graph.operators:
        reason = pinned_reason(op)
        if op.parallelism > 1 and reason is not None and op.type in OPERATOR_TYPES:
            problems.append(Problem(f"operator {op.id!r}",
                                    f"parallelism {op.parallelism} not allowed: {reason}"))
    return problems
