from django.core.management.base import BaseCommand

from webapp.demo import demo_ensure


class Command(BaseCommand):
    help = "Create the demo admin and the demo job if they are missing, and say how to sign in."

    def handle(self, *args, **options):
        result = demo_ensure()
        if result.password is not None:
            self.stdout.write(f"sign in as {result.username!r} with password "
                              f"{result.password!r} (created; shown only this once)")
        else:
            self.stdout.write(f"sign in as {result.username!r} (its password was shown when it "
                              "was created; an admin can reset it with manage.py changepassword)")
        if result.job_id is not None:
            self.stdout.write(f"demo job {result.job_name!r} is job {result.job_id}")
        if result.run_id is not None:
            self.stdout.write(f"demo run {result.run_id} is starting (Spark takes a few seconds)")
