"""A run's restart strategy: how long the watcher waits before restarting a crashed driver,
and when it gives up. Only transient failures are weighed here; the job's own errors fail the
run at once whatever the strategy."""

from __future__ import annotations

from dataclasses import dataclass

from webapp.errors import ServiceError
from webapp.jobs.models import RestartStrategy

EXPONENTIAL_FIRST_S = 1.0
EXPONENTIAL_MAX_S = 60.0
# A driver up this long was no crash loop: the next crash starts the count (and delay) again.
RESET_AFTER_S = 600.0
FIXED_ATTEMPTS, FIXED_DELAY_S = 3, 10.0
MAX_ATTEMPTS, MAX_DELAY_S = 1000, 3600.0


@dataclass(frozen=True)
class RestartPolicy:
    """``exponential`` (the first restart at once, then 1 s doubling to 60 s between one
    restart's launch and the next, without end), ``fixed`` (``attempts`` restarts, each
    ``delay_s`` after its crash) or ``none`` (the first crash fails the run)."""

    strategy: str = RestartStrategy.EXPONENTIAL
    attempts: int | None = None
    delay_s: float | None = None

    def delay_before(self, restart: int) -> float | None:
        """Seconds to wait after a crash before restart number ``restart`` (1 for the first
        of a crash loop), or None when the strategy allows no more."""
        if self.strategy == RestartStrategy.NONE:
            return None
        if self.strategy == RestartStrategy.FIXED:
            return self.delay_s if restart <= (self.attempts or 0) else None
        if restart <= 1:
            # One crash is no loop: waiting would only lengthen the recovery.
            return 0.0
        # The exponent is capped: with no attempt limit the count grows without end.
        return min(EXPONENTIAL_MAX_S, EXPONENTIAL_FIRST_S * 2.0 ** min(restart - 2, 32))

    def waited(self, *, since_launch_s: float, since_crash_s: float) -> float:
        """The time its delay is counted over: since the crash for a fixed delay; for the
        exponential one, since the crashed driver's launch (the last restart). Those delays
        space restarts: a driver that crashes as it starts is retried 1, 2, 4 ... s apart,
        while one that ran longer than its delay proved its restart worked and restarts at
        once."""
        return since_launch_s if self.strategy == RestartStrategy.EXPONENTIAL else since_crash_s

    def describe(self) -> str:
        """As the run page shows it."""
        if self.strategy == RestartStrategy.FIXED:
            return f"fixed: {self.attempts} attempts, each {self.delay_s:g} s after its crash"
        if self.strategy == RestartStrategy.NONE:
            return "none: the first crash fails the run"
        return (f"exponential: at once, then {EXPONENTIAL_FIRST_S:g} s doubling to "
                f"{EXPONENTIAL_MAX_S:g} s between restarts, no attempt limit")

    def as_json(self) -> dict:
        return {"strategy": self.strategy, "attempts": self.attempts, "delay_s": self.delay_s}


def restart_policy_of(*, strategy: str | None, attempts: int | None,
                      delay_s: float | None) -> RestartPolicy:
    """The policy a start request asks for, checked; ServiceError names the field at fault."""
    strategy = strategy or RestartStrategy.EXPONENTIAL
    if strategy not in RestartStrategy.values:
        _refuse("strategy", f"must be one of {', '.join(RestartStrategy.values)}")
    if strategy != RestartStrategy.FIXED:
        for name, value in (("attempts", attempts), ("delay_s", delay_s)):
            if value is not None:
                _refuse(name, f"applies to the fixed strategy only, not to {strategy}")
        return RestartPolicy(strategy=strategy)
    attempts = FIXED_ATTEMPTS if attempts is None else attempts
    delay_s = FIXED_DELAY_S if delay_s is None else delay_s
    if isinstance(attempts, bool) or not isinstance(attempts, int) or not (
            0 <= attempts <= MAX_ATTEMPTS):
        _refuse("attempts", f"must be a whole number from 0 to {MAX_ATTEMPTS}")
    if not 0 <= delay_s <= MAX_DELAY_S:
        _refuse("delay_s", f"must be from 0 to {MAX_DELAY_S:g} seconds")
    return RestartPolicy(strategy=strategy, attempts=attempts, delay_s=float(delay_s))


def restart_policy_of_run(run) -> RestartPolicy:  # noqa: ANN001 - a Run
    return RestartPolicy(strategy=run.restart_strategy, attempts=run.restart_attempts,
                         delay_s=run.restart_delay_s)


def _refuse(field: str, message: str) -> None:
    raise ServiceError(f"restart.{field} {message}",
                       problems=[{"where": f"field restart.{field}", "message": message}])
