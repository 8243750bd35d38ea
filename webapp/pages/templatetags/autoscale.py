"""What the autoscaler panel's form offers: the bounds the server enforces for a run."""

from __future__ import annotations

from django import template

from webapp.autoscaling.services import AUTOSCALE_LIMITS, autoscale_instance_limit

register = template.Library()


@register.filter
def autoscale_bounds(run) -> dict[str, int]:  # noqa: ANN001 - a Run
    """{"instances": most instances per operator, "cooldown_s": longest cooldown}."""
    return {"instances": autoscale_instance_limit(run=run),
            "cooldown_s": AUTOSCALE_LIMITS["cooldown_s"]}
