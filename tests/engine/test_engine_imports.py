"""The pure engine core needs neither Spark nor Django."""

from __future__ import annotations

import subprocess
import sys

from tests.engine.builders import EXAMPLES

CORE = ("engine", "engine.dag", "engine.planner", "engine.mapping", "engine.policies",
        "engine.migration", "engine.cli", "engine.errors")


def test_core_imports_no_spark_or_django() -> None:
    code = (f"import sys; import {', '.join(CORE)}; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('pyspark', 'django', 'channels', 'celery', 'webapp', 'py4j') "
            "or m.startswith('engine.runtime')); print(bad)")
    done = subprocess.run([sys.executable, "-c", code], cwd=EXAMPLES.parent, capture_output=True,
                          text=True, check=True, timeout=60)
    assert done.stdout.strip() == "[]"
