import getpass
import os

from django.core.management.base import BaseCommand, CommandError

from webapp.accounts.roles import Role
from webapp.accounts.services import AccountError, api_token_create, user_create

# A password on the command line is visible to every user of the machine (ps, /proc) and
# kept in shell histories; it comes from this variable or a prompt instead.
PASSWORD_VARIABLE = "STREAMSCALE_USER_PASSWORD"


class Command(BaseCommand):
    help = (
        "Create a user with a role; with --token, print a new API token for it. A password "
        f"for the pages comes from {PASSWORD_VARIABLE} or, with --password-prompt, a prompt."
    )

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--role", required=True, choices=Role.values)
        parser.add_argument("--token", action="store_true", help="print an API token")
        parser.add_argument("--password-prompt", action="store_true",
                            help="ask for a password to sign in to the pages (typed twice)")
        parser.add_argument("--password", help="refused: see --password-prompt")

    def handle(self, *args, name, role, token, password_prompt, password, **options):
        if password is not None:
            raise CommandError(
                "--password would put the password on the command line: use --password-prompt "
                f"or set {PASSWORD_VARIABLE}")
        try:
            user = user_create(username=name, role=role,
                               password=_password(prompt=password_prompt))
        except AccountError as error:
            raise CommandError(str(error)) from None
        if token:
            self.stdout.write(api_token_create(user=user))
        else:
            self.stdout.write(f"created {role} {name}")


def _password(*, prompt: bool) -> str | None:
    """The new user's password: typed at a prompt, or from the environment, or none (the
    user then signs in with API tokens only)."""
    if prompt:
        first = getpass.getpass("Password: ")
        if getpass.getpass("Password (again): ") != first:
            raise CommandError("the two passwords typed differ")
        if not first:
            raise CommandError("the password typed is empty")
        return first
    return os.environ.get(PASSWORD_VARIABLE) or None
