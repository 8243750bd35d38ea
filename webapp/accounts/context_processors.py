from webapp.accounts.roles import Permission


def role(request):
    """Lets templates offer only the controls the user may use."""
    user = getattr(request, "user", None)
    can = {p.value: bool(user and user.is_authenticated and user.can(p)) for p in Permission}
    return {"can": can}
