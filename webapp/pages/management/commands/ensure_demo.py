from django.core.management.base import BaseCommand

from webapp.demo import demo_ensure


class Command(BaseCommand):
    help = "Create the demo admin and the demo job if they are missing, and say how to sign in."

    def handle(self, *args, **options):
        result = demo_ensure()
        self.stdout.write(
            f"sign in as {result.username!r} with password {result.password!r}"
            + (" (created)" if result.created_user else "")
        )
        if result.job_id is not None:
            self.stdout.write(f"demo job {result.job_name!r} is job {result.job_id}")
        if result.run_id is not None:
            self.stdout.write(f"demo run {result.run_id} is starting (Spark takes a few seconds)")
