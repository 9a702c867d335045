from django.core.management.base import BaseCommand

from leaderboard.demo import seed_demo


class Command(BaseCommand):
    help = "Load the starter catalogue, the reported scores and synthetic demo runs (idempotent)."

    def handle(self, **options):
        self.stdout.write("Seeding demo data (starter catalogue, reported scores, synthetic demo runs)...")
        counts = seed_demo()
        self.stdout.write(self.style.SUCCESS(", ".join(f"{name}: {value}" for name, value in counts.items())))
