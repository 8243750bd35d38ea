"""What the autoscaler panel's form offers: the bounds the server enforces for a run."""

from __future__ import annotations

from django import template

from webapp.autoscaling.services import (
    AUTOSCALE_LIMITS,
    autoscale_instance_limit,
    autoscale_waiting,
)

register = template.Library()


@register.filter
def autoscale_bounds(run) -> dict[str, int]:  # noqa: ANN001 - a Run
    """{"instances": most instances per operator, "cooldown_s": longest cooldown}."""
    return {"instances": autoscale_instance_limit(run=run),
            "cooldown_s": AUTOSCALE_LIMITS["cooldown_s"]}


@register.filter
def autoscale_waiting_now(run) -> str | None:  # noqa: ANN001 - a Run
    """Why the autoscaler is not deciding at this moment (cooling down...), or None: read when
    the panel is drawn, not from the loop's last proposal, which may be older."""
    return autoscale_waiting(run=run)
