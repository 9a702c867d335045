"""Run an evaluation worker: find this host's hardware, register it, and work its queues.

Phases (Command.handle): probe the hardware (or take it from the options) -> register the Hardware
row -> check Redis -> sweep once and start the sweeper child -> work the queues until SIGTERM (or
until empty, with --burst), or with several workers (`--workers`, default from the host) start them
and wait (leaderboard.evaluations.worker_pool) -> release what a cold shutdown interrupted and stop
the sweeper.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connections
from django.utils import timezone
from django_rq.workers import get_worker_class
from redis import Redis

from evaluation import probe_hardware
from leaderboard.evaluations.attempts import release_running_on
from leaderboard.evaluations.cores import pin_gpu_worker
from leaderboard.evaluations.queue import redis_connection, worker_redis_connection
from leaderboard.evaluations.rq_worker import REDIS_ERRORS, default_worker_name
from leaderboard.evaluations.sweep import sweep_evaluations
from leaderboard.evaluations.worker_pool import default_worker_count, run_workers, worker_commands
from problems.models import Hardware

log = logging.getLogger(__name__)


def probe(device: str) -> dict[str, Any]:
    """What the scoring library finds about this host, in a child process (this one never touches
    CUDA). A failed probe on device 'auto' falls back to the CPU; on a device asked for by name it
    stops the worker: a GPU queue served where no GPU works would give each kernel the host's failure
    as its verdict (a CUDA build without the toolkit reads as the kernel's compile error)."""
    info = probe_hardware(device)
    if info.get("error") and device == "auto":
        log.warning("hardware probe failed (%s); serving the CPU queue", info["error"])
        info = probe_hardware("cpu")
    elif info.get("error"):
        raise CommandError(
            f"--device {device}: the hardware probe failed here ({info['error']}); not serving its queue"
        )
    return info


def register_hardware(info: dict[str, Any]) -> Hardware:
    slug = info.get("hardware_slug") or "cpu"
    is_cpu = slug == "cpu" or info.get("device") == "cpu"
    found = {
        "kind": Hardware.Kind.CPU if is_cpu else Hardware.Kind.GPU,
        "device_name": (info.get("device_name") or "")[:200],
        "driver_version": (info.get("driver") or "")[:60],
        "cuda_version": (info.get("cuda") or "")[:60],
        "torch_version": (info.get("torch") or "")[:60],
        "python_version": (info.get("python") or "")[:60],
        "last_seen_at": timezone.now(),
    }
    if "device" not in info:  # not probed: only say the worker is alive
        hardware, _ = Hardware.objects.get_or_create(slug=slug, defaults={"name": slug.upper(), "kind": found["kind"]})
        Hardware.objects.filter(pk=hardware.pk).update(last_seen_at=found["last_seen_at"])
        return hardware
    hardware, created = Hardware.objects.get_or_create(
        slug=slug, defaults={**found, "name": info.get("device_name") or slug.upper()}
    )
    if not created:
        for key, value in found.items():
            if value or key == "last_seen_at":
                setattr(hardware, key, value)
        hardware.save()
    return hardware


def device_of(info: dict[str, Any], hardware: Hardware) -> str:
    """'cpu' or 'cuda': what the probe found, else what the Hardware row is."""
    return info.get("device") or ("cpu" if hardware.kind == Hardware.Kind.CPU else "cuda")


def _slug_from(queues: list[str] | None) -> str:
    if not queues or not queues[0].startswith("eval-"):
        raise CommandError("--no-probe needs --device cpu or a --queue eval-<slug>")
    return queues[0].removeprefix("eval-")


def _die_with_parent() -> None:
    # The sweeper child gets SIGTERM when its worker dies, even by SIGKILL (Linux only).
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Command(BaseCommand):
    help = "Work the evaluation queues of this host's hardware (eval-<slug>) until SIGTERM."

    def add_arguments(self, parser):
        parser.add_argument(
            "--queue",
            action="append",
            dest="queues",
            metavar="NAME",
            help="queue to listen to (repeatable); default: eval-<detected hardware slug>",
        )
        parser.add_argument("--burst", action="store_true", help="stop once the queues are empty")
        parser.add_argument(
            "--device",
            choices=["auto", "cpu", "cuda"],
            default="auto",
            help="what to probe for (default: a GPU if there is one, else the CPU)",
        )
        parser.add_argument("--name", default="", help="worker name (default: host.pid)")
        parser.add_argument(
            "--no-sweep",
            action="store_true",
            help="do not run the sweeper child (when a separate sweep_evaluations runs)",
        )
        parser.add_argument(
            "--no-probe",
            action="store_true",
            help="skip the hardware probe (a child importing torch, seconds) and serve --device's queue or the "
            "--queue given; the tests use it, and so can a quick restart",
        )
        parser.add_argument("--max-jobs", type=int, default=None, help="stop after this many jobs")
        parser.add_argument(
            "--workers",
            type=int,
            default=None,
            help="worker processes to run (default: EVAL_WORKERS, else what the host runs well: one per GPU, "
            "one per 4 CPU cores; docs/workers.md)",
        )
        parser.add_argument(
            "--no-prebuild",
            action="store_true",
            help="do not run the builder child that compiles upcoming kernels ahead of the GPU",
        )

    def handle(self, *args, **options):
        info = self.hardware_info(options)
        hardware = register_hardware(info)
        queues = options["queues"] or [hardware.queue_name]
        unknown = [q for q in queues if q not in settings.EVAL_QUEUES]
        if unknown:
            self.stderr.write(
                f"warning: {', '.join(unknown)} not in EVAL_QUEUES; nothing enqueues there unless "
                "a Hardware row's slug matches"
            )
        name = options["name"] or default_worker_name()
        self.stdout.write(
            f"worker {name}: {hardware.slug} ({info.get('device_name') or 'cpu'}, torch "
            f"{info.get('torch')}, CUDA {info.get('cuda')}); queues {', '.join(queues)}"
        )
        conn = self.connect()
        self.startup_sweep()
        count = options["workers"] or default_worker_count(device_of(info, hardware))
        sweeper = builder = None
        if not options["burst"] and not options["no_sweep"]:
            sweeper = start_sweeper(hardware.slug)
        if hardware.kind == Hardware.Kind.GPU and not options["no_prebuild"] and settings.EVAL_BUILD_WORKERS != 0:
            builder = start_builder(queues, info, host_wide=count > 1)
        try:
            if count > 1:
                self.stdout.write(f"worker {name}: starting {count} workers")
                commands = worker_commands(count, device_of(info, hardware), queues, name, options)
                if run_workers(commands):
                    raise CommandError(f"worker {name}: a worker exited with an error")
            else:
                if device_of(info, hardware) == "cuda":
                    pin_gpu_worker()  # off every timing core; its evaluations time on its GPU's core
                self.work(queues, conn, name, options)
        finally:
            # After a cold shutdown (second SIGTERM) the horse was killed mid-job: retry it now.
            with contextlib.suppress(Exception):
                release_running_on(name, "worker shut down during the job")
            stop_sweeper(sweeper)
            stop_sweeper(builder)
        self.stdout.write(f"worker {name}: stopped")

    def hardware_info(self, options: dict[str, Any]) -> dict[str, Any]:
        if options["no_probe"]:
            return {"hardware_slug": "cpu" if options["device"] == "cpu" else _slug_from(options["queues"])}
        return probe(options["device"])

    def connect(self) -> Redis:
        try:
            redis_connection().ping()
            conn = worker_redis_connection()  # RQ's dequeue blocks: no socket timeout on its loop
        except Exception as exc:
            raise CommandError(f"Redis at {settings.REDIS_URL} is unreachable: {exc}") from exc
        return conn

    def startup_sweep(self) -> None:
        try:
            self.stdout.write(f"startup sweep: {sweep_evaluations()}")
        except Exception as exc:  # a failed sweep must not keep a worker from working
            self.stderr.write(f"startup sweep failed: {exc}")

    def work(self, queues: list[str], conn: Redis, name: str, options: dict[str, Any]) -> None:
        """Work the queues with settings.RQ's WORKER_CLASS (leaderboard.evaluations.rq_worker.EvalWorker)
        until SIGTERM; again, under the same name, after Redis went away under RQ's loop (which then
        quits): the running horse finishes first, and Redis must answer."""
        while True:
            connections.close_all()
            # The parent checks on its horse (and beats RQ's registration) as often as the attempt beats.
            monitor_s = max(1, settings.EVAL_HEARTBEAT_S)
            listened = with_instruments_queues(queues)
            worker = get_worker_class()(listened, connection=conn, name=name, job_monitoring_interval=monitor_s)
            try:
                worker.work(
                    burst=options["burst"],
                    with_scheduler=False,  # retries wait in the database; the sweep enqueues them when due
                    max_jobs=options["max_jobs"],
                    logging_level=settings.LOGGING.get("root", {}).get("level", "INFO"),
                )
            except REDIS_ERRORS as exc:  # RQ's teardown, while Redis is still away
                worker.redis_lost = worker.redis_lost or exc
            if worker.redis_lost is None:
                return
            self.stderr.write(f"worker {name}: Redis went away during RQ's loop ({worker.redis_lost}); recovering")
            if not worker.ride_out_redis_loss():  # False on SIGTERM, once the horse is done
                return
            self.stdout.write(f"worker {name}: Redis answers again; working again")


def with_instruments_queues(queues: list[str]) -> list[str]:
    """`queues`, then the instruments queue of each evaluation queue among them: RQ takes the queues
    in this order, so an instruments' follow-up runs only when no evaluation waits."""
    later = [f"instruments-{q.removeprefix('eval-')}" for q in queues if q.startswith("eval-")]
    return [*queues, *(q for q in later if q not in queues)]


def start_sweeper(slug: str) -> subprocess.Popen[bytes]:
    """The sweeper child (`sweep_evaluations --loop`), which also keeps the Hardware row's last_seen_at."""
    command = [sys.executable, sys.argv[0], "sweep_evaluations", "--loop", "--hardware", slug]
    command += ["--interval", str(settings.EVAL_SWEEP_INTERVAL_S)]
    return subprocess.Popen(command, preexec_fn=_die_with_parent)


def start_builder(queues: list[str], info: dict[str, Any], host_wide: bool) -> subprocess.Popen[bytes]:
    """The builder child (`prebuild_evaluations`): compiles the next queued kernels on the CPU. The
    worker's jobs and the builder build for the GPU's architecture (the probe's), so one build serves
    every GPU of the host. ``host_wide``: this evalworker runs all of the host's GPU workers, so its
    builder gets the host's whole build share (else each per-GPU worker's builder gets its part).
    Either way it builds off the timing cores (leaderboard.evaluations.cores)."""
    if info.get("capability") and not os.environ.get("TORCH_CUDA_ARCH_LIST"):
        os.environ["TORCH_CUDA_ARCH_LIST"] = str(info["capability"])
    command = [sys.executable, sys.argv[0], "prebuild_evaluations"]
    for queue in queues:
        command += ["--queue", queue]
    if host_wide:
        command.append("--host-wide")
    return subprocess.Popen(command, preexec_fn=_die_with_parent)


def stop_sweeper(sweeper: subprocess.Popen[bytes] | None) -> None:
    if sweeper is not None:
        sweeper.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            sweeper.wait(timeout=10)
