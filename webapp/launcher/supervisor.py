"""Keeping the group up: a child that exits is started again after a back-off, and an embedded
server that died is started again on its recorded port; nothing else is disturbed."""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field

from webapp.launcher.children import Child, ChildGroup, say
from webapp.launcher.embedded_services import Services

FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 30.0
# A child that stayed up this long was healthy: its next crash starts the back-off again.
STABLE_AFTER_S = 60.0
POLL_S = 0.5


def exit_description(code: int) -> str:
    """``code 1`` or ``code -9 (SIGKILL)``."""
    killed_by = f" ({signal.Signals(-code).name})" if code < 0 else ""
    return f"code {code}{killed_by}"


@dataclass
class Supervisor:
    """Restarts crashed children with an exponential back-off per child, and the embedded
    servers the launcher started when they die."""

    group: ChildGroup
    services: Services
    crashes: dict[str, int] = field(default_factory=dict)
    due: dict[str, float] = field(default_factory=dict)

    def run_forever(self) -> None:
        """Return never; leaves by exception (Shutdown on a signal)."""
        while True:
            self.check_once()
            time.sleep(POLL_S)

    def check_once(self) -> None:
        """One pass: servers first (the children need them), then the children."""
        for name in self.services.restart_dead():
            say(f"[launcher] embedded {name} had died; started it again")
        for child in list(self.group.children):
            if child.process.poll() is not None:
                self._child_exited(child)

    def _child_exited(self, child: Child) -> None:
        now = time.monotonic()
        if child.name not in self.due:
            stable = now - child.started_at > STABLE_AFTER_S
            crashes = 1 if stable else self.crashes.get(child.name, 0) + 1
            self.crashes[child.name] = crashes
            delay = min(MAX_BACKOFF_S, FIRST_BACKOFF_S * 2 ** (crashes - 1))
            self.due[child.name] = now + delay
            say(f"[launcher] {child.name} exited unexpectedly with "
                f"{exit_description(child.process.returncode)}; restarting it in {delay:.0f} s")
        if now >= self.due[child.name]:
            del self.due[child.name]
            self.group.restart(child)
            say(f"[launcher] {child.name} restarted")
