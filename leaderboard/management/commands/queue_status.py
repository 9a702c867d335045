"""What the evaluation queues hold, side by side with what the database says is pending.

Sections: one line per queue (jobs in Redis by RQ registry beside queued / running evaluations in
the database), the live workers, the worker hosts' free disk space (a host below EVAL_MIN_FREE_MB
starts nothing), when each hardware was last seen, and the bound on a dead worker.
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db.models import Count, Min
from redis import Redis
from rq import Worker

from leaderboard.evaluations import host_space
from leaderboard.evaluations.clock import db_now
from leaderboard.evaluations.queue import eval_queue, redis_connection
from leaderboard.evaluations.sweep import dead_worker_bound_s
from leaderboard.models import Evaluation
from problems.models import Hardware


class Command(BaseCommand):
    help = "Show each evaluation queue: jobs in Redis, evaluations pending in the database, workers."

    def handle(self, *args, **options):
        now = db_now()  # ages by the clock the workers wrote them with
        hardware = list(Hardware.objects.all())
        conn = self.connect()
        self.show_queues(now, conn, hardware)
        if conn is not None:
            self.show_workers(conn)
            self.show_space()
        self.stdout.write("\nhardware last seen:")
        for hw in hardware:
            seen = f"{(now - hw.last_seen_at).total_seconds():.0f} s ago" if hw.last_seen_at else "never"
            self.stdout.write(f"  {hw.slug:<10} {hw.device_name or '-':<30} {seen}")
        self.stdout.write(f"\na dead worker's job is noticed within {dead_worker_bound_s()} s while a sweeper runs")

    def connect(self) -> Redis | None:
        try:
            conn = redis_connection()
            conn.ping()
        except Exception as exc:
            self.stdout.write(f"Redis at {settings.REDIS_URL} unreachable: {exc}")
            return None
        return conn

    def show_queues(self, now: datetime, conn: Redis | None, hardware: list[Hardware]) -> None:
        """One line per queue: EVAL_QUEUES and the queue of every hardware with pending evaluations."""
        queue_of = {hw.pk: hw.queue_name for hw in hardware}
        rows = Evaluation.objects.pending().values("hardware", "state").annotate(n=Count("id"), oldest=Min("queued_at"))
        pending = {(queue_of[row["hardware"]], row["state"]): row for row in rows}
        names = sorted({name for name, _ in pending} | set(settings.EVAL_QUEUES))
        header = f"{'queue':<14}{'redis:waiting':>14}{'scheduled':>10}{'started':>9}{'failed':>8}"
        self.stdout.write(header + f"{'db:queued':>11}{'running':>9}  oldest queued")
        for name in names:
            queued = pending.get((name, Evaluation.State.QUEUED), {})
            running = pending.get((name, Evaluation.State.RUNNING), {})
            counts = redis_counts(name) if conn is not None else ["?"] * 4
            oldest = queued.get("oldest")
            age = f"{(now - oldest).total_seconds():.0f} s ago" if oldest else "-"
            self.stdout.write(
                f"{name:<14}{counts[0]:>14}{counts[1]:>10}{counts[2]:>9}{counts[3]:>8}"
                f"{queued.get('n', 0):>11}{running.get('n', 0):>9}  {age}"
            )

    def show_workers(self, conn: Redis) -> None:
        self.stdout.write("\nworkers:")
        for worker in Worker.all(connection=conn):
            job = worker.get_current_job_id() or "idle"
            queues = ",".join(worker.queue_names())
            self.stdout.write(f"  {worker.name:<32} {worker.get_state():<10} {queues:<20} {job}")

    def show_space(self) -> None:
        """Free space each worker host reported (its sweeper, every sweep); below the floor it starts nothing."""
        self.stdout.write(f"\ndisk space on worker hosts (floor EVAL_MIN_FREE_MB={settings.EVAL_MIN_FREE_MB}):")
        for space in host_space.reports():
            free = ", ".join(f"{label} {mb:.0f} MB free" for label, mb in space.free_mb.items())
            verdict = f"STARTS NOTHING: {space.reason}" if space.refusing else "ok"
            self.stdout.write(f"  {space.host:<24} {free:<48} {verdict}")


def redis_counts(name: str) -> list[int]:
    """Jobs of the queue waiting, scheduled (retries), started and failed, from RQ's registries."""
    queue = eval_queue(name)
    registries = (queue.scheduled_job_registry, queue.started_job_registry, queue.failed_job_registry)
    return [queue.count, *(registry.count for registry in registries)]
