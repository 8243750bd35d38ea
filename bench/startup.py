"""``python -m bench startup``: how soon a new driver computes, with the JVM class archive
and without it.

A driver is started as the engine's command line (``python -m engine run``) on a small keyed
window job, as a run's driver is started when no warm standby takes it over (a recovery on a
standalone cluster, a second crash before the standby is back) and as every warm standby
starts. The clock runs from the process's spawn to its first epoch's line: the Python start,
the JVM's, Spark's session and the job's first epoch. Starts with the archive and without it
(the driver given an archives' folder that holds none) alternate, ``samples`` each.

Figures (the JSON line):
- ``first_epoch_s_p50`` / ``first_epoch_s_max``: spawn to first epoch, with the archive;
- ``first_epoch_s_p50_without`` / ``first_epoch_s_max_without``: the same without it;
- ``speedup``: the median without over the median with.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.workload import generator_source, window_count_job
from engine.runtime.spark.class_archive import FOLDER_VARIABLE, archive_path
from engine.runtime.spark.session import project_root


def measure(*, samples: int = 3) -> dict[str, Any]:
    """``samples`` starts each way, alternating which goes first."""
    path = archive_path()
    if path is None or not path.is_file():
        raise SystemExit("bench startup: no JVM class archive; `make install` makes it")
    with_archive: list[float] = []
    without: list[float] = []
    for sample in range(samples):
        order = [True, False] if sample % 2 == 0 else [False, True]
        for archived in order:
            seconds = _first_epoch_s(archived)
            (with_archive if archived else without).append(seconds)
            print(f"[bench startup] {'with' if archived else 'without'} the archive: "
                  f"{seconds:.2f} s", file=sys.stderr, flush=True)
    return {
        "samples": samples,
        "first_epoch_s_p50": round(statistics.median(with_archive), 2),
        "first_epoch_s_max": round(max(with_archive), 2),
        "first_epoch_s_p50_without": round(statistics.median(without), 2),
        "first_epoch_s_max_without": round(max(without), 2),
        "speedup": round(statistics.median(without) / statistics.median(with_archive), 2),
        "context": {"archive": str(path), "with": with_archive, "without": without},
    }


def _first_epoch_s(archived: bool) -> float:
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as folder:
        job = Path(folder) / "job.json"
        document = window_count_job(generator_source(2000, keys=100), 2, "bench_startup")
        job.write_text(json.dumps(document))
        env = dict(os.environ)
        if not archived:
            env[FOLDER_VARIABLE] = str(Path(folder) / "no-archive")
        command = [sys.executable, "-m", "engine", "run", str(job), "--checkpoint",
                   str(Path(folder) / "ckpt"), "--trigger-ms", "0", "--stop-after-epoch", "2"]
        started = time.monotonic()
        with subprocess.Popen(command, cwd=project_root(), env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True) as proc:
            for line in proc.stdout:  # type: ignore[union-attr]
                if line.startswith("epoch="):
                    seconds = time.monotonic() - started
                    break
            else:
                raise RuntimeError(f"the driver exited with {proc.wait()} before an epoch")
            proc.wait(timeout=120)
    return round(seconds, 2)
