from django.core.management.base import BaseCommand

from webapp.runs.standby import standbys_stop
from webapp.runs.supervision import drivers_suspend


class Command(BaseCommand):
    help = ("Stop this host's driver processes without ending their runs: the next start of "
            "the product resumes each run from its checkpoint. Free warm standbys are stopped.")

    def add_arguments(self, parser):
        parser.add_argument("--grace", type=float, default=30.0,
                            help="seconds to wait for a graceful stop before killing")

    def handle(self, *args, grace, **options):
        for line in drivers_suspend(grace_s=grace):
            self.stdout.write(line)
        for pid in standbys_stop():
            self.stdout.write(f"standby driver {pid} stopped")
