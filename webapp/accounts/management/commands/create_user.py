from django.core.management.base import BaseCommand, CommandError

from webapp.accounts.roles import Role
from webapp.accounts.services import AccountError, api_token_create, user_create


class Command(BaseCommand):
    help = "Create a user with a role; with --token, print a new API token for it."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--role", required=True, choices=Role.values)
        parser.add_argument("--token", action="store_true", help="print an API token")
        parser.add_argument("--password", help="allow signing in to the pages with this password")

    def handle(self, *args, name, role, token, password, **options):
        try:
            user = user_create(username=name, role=role, password=password)
        except AccountError as error:
            raise CommandError(str(error)) from None
        if token:
            self.stdout.write(api_token_create(user=user))
        else:
            self.stdout.write(f"created {role} {name}")
