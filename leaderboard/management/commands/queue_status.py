"""What the evaluation queues hold, side by side with what the database says is pending."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db.models import Count, Min
from django.utils import timezone
from rq import Worker
from rq.registry import FailedJobRegistry, ScheduledJobRegistry, StartedJobRegistry

from leaderboard.evaluations.queue import eval_queue, redis_connection
from leaderboard.evaluations.worker import dead_worker_bound_s
from leaderboard.models import Evaluation
from problems.models import Hardware


class Command(BaseCommand):
    help = "Show each evaluation queue: jobs in Redis, evaluations pending in the database, workers."

    def handle(self, *args, **options):
        now = timezone.now()
        pending = {
            (row["hardware__slug"], row["state"]): row
            for row in Evaluation.objects.filter(state__in=[Evaluation.State.QUEUED, Evaluation.State.RUNNING])
            .values("hardware__slug", "state")
            .annotate(n=Count("id"), oldest=Min("queued_at"))
        }
        slugs = sorted({slug for slug, _ in pending} | {q.removeprefix("eval-") for q in settings.EVAL_QUEUES})
        try:
            conn = redis_connection()
            conn.ping()
        except Exception as exc:
            conn = None
            self.stdout.write(f"Redis at {settings.REDIS_URL} unreachable: {exc}")
        header = f"{'queue':<14}{'redis:waiting':>14}{'scheduled':>10}{'started':>9}{'failed':>8}"
        header += f"{'db:queued':>11}{'running':>9}  oldest queued"
        self.stdout.write(header)
        for slug in slugs:
            name = f"eval-{slug}"
            queued = pending.get((slug, Evaluation.State.QUEUED), {})
            running = pending.get((slug, Evaluation.State.RUNNING), {})
            if conn is not None:
                queue = eval_queue(name)
                counts = [
                    queue.count,
                    ScheduledJobRegistry(name, connection=conn).count,
                    StartedJobRegistry(name, connection=conn).count,
                    FailedJobRegistry(name, connection=conn).count,
                ]
            else:
                counts = ["?"] * 4
            oldest = queued.get("oldest")
            age = f"{(now - oldest).total_seconds():.0f} s ago" if oldest else "-"
            self.stdout.write(
                f"{name:<14}{counts[0]:>14}{counts[1]:>10}{counts[2]:>9}{counts[3]:>8}"
                f"{queued.get('n', 0):>11}{running.get('n', 0):>9}  {age}"
            )
        if conn is not None:
            self.stdout.write("\nworkers:")
            for worker in Worker.all(connection=conn):
                job = worker.get_current_job_id() or "idle"
                queues = ",".join(worker.queue_names())
                self.stdout.write(f"  {worker.name:<32} {worker.get_state():<10} {queues:<20} {job}")
        self.stdout.write("\nhardware last seen:")
        for hw in Hardware.objects.all():
            seen = f"{(now - hw.last_seen_at).total_seconds():.0f} s ago" if hw.last_seen_at else "never"
            self.stdout.write(f"  {hw.slug:<10} {hw.device_name or '-':<30} {seen}")
        self.stdout.write(f"\na dead worker's job is noticed within {dead_worker_bound_s()} s while a sweeper runs")
