"""The engine stays framework-free: no Django, Channels, Celery or webapp imports in engine/,
and PySpark only in its runtime."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = ("django", "channels", "celery", "webapp", "daphne")


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, wherever the import sits (module level or inside a
    function), relative imports resolved, and the literal names given to
    ``importlib.import_module`` or ``__import__``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = path.relative_to(ROOT).with_suffix("").parts[:-1]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else ()
            module = ".".join([*base, *([node.module] if node.module else [])])
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call) and _dynamic_import(node):
            names.add(node.args[0].value)  # type: ignore[attr-defined]
    return names


def _dynamic_import(call: ast.Call) -> bool:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    return (name in ("import_module", "__import__") and bool(call.args)
            and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str))


def _imports(path: Path) -> set[str]:
    """The top-level packages ``path`` imports."""
    return {name.split(".")[0] for name in imported_modules(path)}


def test_engine_source_imports_no_framework():
    offenders = {
        str(path.relative_to(ROOT)): sorted(_imports(path) & set(FORBIDDEN))
        for path in (ROOT / "engine").rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_only_the_runtime_imports_pyspark():
    offenders = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "engine").rglob("*.py")
        if "pyspark" in _imports(path) and "runtime" not in path.relative_to(ROOT).parts
    ]
    assert offenders == []


def test_importing_the_engine_loads_no_framework():
    code = (
        "import sys, engine, engine.dag, engine.planner, engine.mapping, engine.policies;"
        f"bad = [m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r} + ('pyspark',)];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_webapp_reaches_the_engine_through_its_gateway_only():
    users = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "webapp").rglob("*.py")
        if "engine" in _imports(path) and path.parent.name != "engine_gateway"
    ]
    assert users == []


ENGINE_DOORS = {"engine.api", "engine.runtime.api"}


def test_the_gateway_uses_the_engine_through_its_two_apis_only():
    offenders = {
        str(path.relative_to(ROOT)): sorted(
            name for name in imported_modules(path)
            if name.split(".")[0] == "engine" and not any(
                name == door or name.startswith(f"{door}.") for door in ENGINE_DOORS))
        for path in (ROOT / "webapp" / "engine_gateway").rglob("*.py")
    }
    assert {path: bad for path, bad in offenders.items() if bad} == {}


PURE_LAYERS = ("dag", "planner", "policies", "mapping", "migration")


def test_the_engines_pure_layers_import_nothing_of_the_runtime():
    offenders = {
        str(path.relative_to(ROOT)): sorted(
            name for name in imported_modules(path) if name.startswith("engine.runtime"))
        for layer in PURE_LAYERS
        for path in (ROOT / "engine" / layer).rglob("*.py")
    }
    assert {path: bad for path, bad in offenders.items() if bad} == {}


def test_the_import_walker_sees_local_relative_and_dynamic_imports() -> None:
    module = ROOT / "engine" / "dag" / "_walker_probe.py"
    module.write_text(
        "import importlib\n"
        "def f():\n"
        "    from engine.runtime.spark import session\n"
        "    from ..runtime import cli\n"
        "    return importlib.import_module('engine.runtime.api')\n")
    try:
        found = imported_modules(module)
    finally:
        module.unlink()
    assert {"engine.runtime.spark", "engine.runtime", "engine.runtime.api"} <= found


# The runtime's rooms, bottom up: each may import only the rooms listed for it (and the
# runtime's root exception, ``engine.runtime.errors``). Nothing in a room imports the entry
# points above them (``engine.runtime.api``, ``engine.runtime.cli``).
RUNTIME = ROOT / "engine" / "runtime"
ROOMS: dict[str, set[str]] = {
    "spark": set(),
    "state": set(),
    "operators": {"state"},
    "io": {"spark"},
    "control": {"io"},
    "stage": {"spark", "state", "operators", "io", "control"},
    "driver": {"spark", "state", "io", "control", "stage"},
}
WITHOUT_SPARK = ("state", "operators", "control")


def _room_imports(room: str) -> set[str]:
    """The other parts of the runtime (rooms or root modules) that ``room`` imports."""
    parts: set[str] = set()
    for path in (RUNTIME / room).rglob("*.py"):
        for name in imported_modules(path):
            if name.startswith("engine.runtime."):
                parts.add(name.split(".")[2])
    return parts - {room}


def test_the_runtime_is_made_of_its_rooms():
    packages = {p.name for p in RUNTIME.iterdir() if (p / "__init__.py").exists()}
    modules = {p.stem for p in RUNTIME.glob("*.py")}
    assert packages == set(ROOMS)
    assert modules == {"__init__", "api", "cli", "errors"}


def test_each_runtime_room_imports_only_the_rooms_below_it():
    offenders = {
        room: sorted(_room_imports(room) - allowed - {"errors"})
        for room, allowed in ROOMS.items()
    }
    assert {room: bad for room, bad in offenders.items() if bad} == {}


def test_the_rooms_below_the_stage_run_without_spark():
    offenders = [
        str(path.relative_to(ROOT))
        for room in WITHOUT_SPARK
        for path in (RUNTIME / room).rglob("*.py")
        if "pyspark" in _imports(path)
    ]
    assert offenders == []
