"""A Spark standalone cluster on loopback (one master, workers) from the pyspark package."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyspark


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class LoopbackCluster:
    """Master and workers as child processes; ``url`` is the spark:// master URL."""

    workdir: Path
    workers: int = 2
    cores: int = 1
    memory: str = "1g"
    app_cores: int | None = None  # the master's cap on each application's cores
    url: str = ""
    processes: list[subprocess.Popen] = field(default_factory=list)

    def start(self) -> None:
        """Starts the master, then the workers, and waits until they registered."""
        home = Path(pyspark.__file__).parent
        env = {
            **os.environ,
            "SPARK_HOME": str(home),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_NO_DAEMONIZE": "1",
            # The Redis store's cache of state runs, as one machine's workers share it.
            "STREAMSCALE_RUNS_CACHE": str(self.workdir / "runs-cache"),
        }
        if self.app_cores is not None:
            env["SPARK_MASTER_OPTS"] = f"-Dspark.deploy.defaultCores={self.app_cores}"
        port = free_port()
        self.url = f"spark://127.0.0.1:{port}"
        spark_class = str(home / "bin" / "spark-class")
        self._spawn(
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(free_port()),
            ],
            env,
            "master",
        )
        self._await_log("master", "I have been elected leader", 60)
        for i in range(self.workers):
            self._spawn(
                [
                    spark_class,
                    "org.apache.spark.deploy.worker.Worker",
                    self.url,
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    str(self.cores),
                    "--memory",
                    self.memory,
                    "--webui-port",
                    str(free_port()),
                    "--work-dir",
                    str(self.workdir / f"work{i}"),
                ],
                env,
                f"worker{i}",
            )
        for i in range(self.workers):
            self._await_log(f"worker{i}", "Successfully registered with master", 60)

    def _spawn(self, command: list[str], env: dict[str, str], name: str) -> None:
        log = open(self.workdir / f"{name}.log", "w")  # noqa: SIM115  # closed with the process
        self.processes.append(
            subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        )

    def _await_log(self, name: str, text: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        path = self.workdir / f"{name}.log"
        while time.monotonic() < deadline:
            if path.exists() and text in path.read_text(errors="replace"):
                return
            time.sleep(0.2)
        raise TimeoutError(f"{name} did not log {text!r}:\n{path.read_text()[-2000:]}")

    def stop(self) -> None:
        """Kills every process of the cluster."""
        for proc in self.processes:
            try:
                os.killpg(proc.pid, 9)
            except ProcessLookupError:
                pass
            proc.wait()
