"""kbl's commands. Exit status: 0 done; 1 something failed (an evaluation failed, a kernel was not
correct, waiting timed out); 2 bad usage; 3 the site refused, could not be reached, or answered
with something other than what the command reads (kbl/replies.py)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from kbl import __version__, display, replies
from kbl.bundle import read_upload
from kbl.config import settings
from kbl.errors import ApiError, UsageError
from kbl.http import Api

FAILED, USAGE, API = 1, 2, 3
PENDING = ("queued", "running")
ZIP_MAGIC = b"PK\x03\x04"


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", default=argparse.SUPPRESS, help="the site (default: $KBL_URL, the config file)")
    common.add_argument("--token", default=argparse.SUPPRESS, help="API token (default: $KBL_TOKEN, the config file)")
    parser = argparse.ArgumentParser(prog="kbl", description="The KernelBench leaderboard's client.", parents=[common])
    parser.add_argument("--version", action="version", version=f"kbl {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, text: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=text, parents=[common])

    submit = command("submit", "import a KernelBench run folder or zip")
    submit.add_argument("path", type=Path, help="run folder, .zip or .json")
    submit.add_argument("--model", help="default: the folder's generation_config.yaml")
    submit.add_argument("--hardware", required=True, help="slug or name, e.g. h200")
    submit.add_argument("--set", help="problem set slug or name (default: the one set holding the kernels' problems)")
    for name in ("setting", "name", "precision", "organization"):
        submit.add_argument(f"--{name}")
    submit.add_argument("--verify", action="store_true", help="evaluate every kernel here too")
    submit.add_argument("--wait", action="store_true", help="wait for the verification, then print fast_p")
    _waiting(submit)
    status = command("status", "a run's verification progress and fast_p")
    status.add_argument("run", type=int)
    status.add_argument("--wait", action="store_true")
    _waiting(status)
    kernel = command("kernel", "submit one kernel for evaluation")
    kernel.add_argument("problem", type=int, help="the problem's id (see /problems/)")
    kernel.add_argument("kernel", type=Path, help="a Python file defining class ModelNew")
    kernel.add_argument("--hardware", required=True)
    kernel.add_argument("--model", help="the model's slug (default: $KBL_MODEL); or give --run")
    kernel.add_argument("--run", type=int, help="add the kernel to this run instead")
    kernel.add_argument("--wait", action="store_true")
    _waiting(kernel)
    export = command("export", "a run as a KernelBench run folder (zip)")
    export.add_argument("run", type=int)
    export.add_argument("-o", "--output", type=Path, required=True)
    export.add_argument("--level", type=int, choices=[1, 2, 3, 4])
    return parser


def _waiting(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between polls")
    parser.add_argument("--timeout", type=float, default=3600.0, help="give up waiting after this many seconds")


def wait_for_run(api: Api, run: int, interval: float, timeout: float) -> dict[str, Any]:
    """Poll the run's progress with a progress bar until nothing is queued or running."""
    deadline = time.monotonic() + timeout
    while True:
        progress = api.get(f"/api/v1/runs/{run}/progress/", replies.RUN_PROGRESS)
        display.progress_bar(progress)
        if progress["pending"] == 0:
            sys.stderr.write("\n")
            return progress
        if time.monotonic() > deadline:
            raise TimeoutError(f"run {run}: still {display.printable(progress['label'])} after {timeout:g} s")
        time.sleep(interval)


def report_run(api: Api, run: int, hint_verify: bool = False) -> int:
    """Print the run's fast_p and progress; ``hint_verify``: say how to evaluate the kernels that have no
    evaluation at all (an import alone evaluates nothing)."""
    scores = api.get(f"/api/v1/runs/{run}/scores/", replies.SCORES)
    print(display.fast_p_table(scores))
    progress = scores["progress"]
    print(f"{display.printable(progress['label'])} · {api.settings.url}/runs/{run}/")
    if hint_verify and (not_evaluated := progress.get("not_evaluated")):  # a server before it: no hint
        print(f"{not_evaluated} of {progress['total']} kernels are stored, not evaluated: "
              "submit again with --verify to evaluate them here (--wait follows them)", file=sys.stderr)  # fmt: skip
    return FAILED if progress["failed"] else 0


def submit(api: Api, args: argparse.Namespace) -> int:
    filename, data = read_upload(args.path)
    fields = {"hardware": args.hardware, "model": args.model, "problem_set": args.set, "setting": args.setting,
              "name": args.name, "precision": args.precision, "organization": args.organization}  # fmt: skip
    reply = api.upload(
        "/api/v1/runs/import/", {k: v for k, v in fields.items() if v}, {"file": (filename, data)}, replies.IMPORTED
    )
    run = reply["run"]["id"]
    kernels = reply["kernels"]
    print(
        f"run {run}: {kernels['created']} kernels created, {kernels['unchanged']} unchanged · {api.settings.url}/runs/{run}/"
    )
    for warning in reply.get("warnings") or []:
        print(f"  warning: {display.printable(warning)}", file=sys.stderr)
    if args.verify:
        queued = api.post(f"/api/v1/runs/{run}/verify/", shape=replies.VERIFIED)
        print(f"queued {queued['queued']} evaluations ({queued['skipped']} already waiting)")
    if args.wait:
        wait_for_run(api, run, args.interval, args.timeout)
    return report_run(api, run, hint_verify=not args.verify)


def status(api: Api, args: argparse.Namespace) -> int:
    if args.wait:
        wait_for_run(api, args.run, args.interval, args.timeout)
    return report_run(api, args.run)


def kernel(api: Api, args: argparse.Namespace) -> int:
    try:
        source = args.kernel.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {args.kernel}: {exc.strerror}") from None
    body = {"problem": args.problem, "source": source, "hardware": args.hardware}
    if args.run:
        body["run"] = args.run
    elif model := args.model or os.environ.get("KBL_MODEL"):
        body["model"] = model
    reply = api.post("/api/v1/submissions/", body, replies.SUBMITTED)
    print(
        f"evaluation {reply['id']} of kernel {reply['kernel']}: {display.printable(reply['status'])}"
        f" · {api.settings.url}/kernels/{reply['kernel']}/"
    )
    if not args.wait:
        return 0
    deadline = time.monotonic() + args.timeout
    while (evaluation := api.get(f"/api/v1/evaluations/{reply['id']}/", replies.EVALUATION))["state"] in PENDING:
        display.progress_bar({"total": 1, "evaluated": 0, "failed": 0, "label": evaluation["progress"]["label"]})
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"evaluation {reply['id']}: still {display.printable(evaluation['state'])} after {args.timeout:g} s"
            )
        time.sleep(args.interval)
    sys.stderr.write("\n")
    speedup = evaluation.get("speedup")
    outcome = display.printable(evaluation.get("status") or evaluation["progress"]["label"])
    print(f"{display.printable(evaluation['state'])}: {outcome}" + (f", speedup {speedup:.2f}x" if speedup else ""))
    return 0 if evaluation.get("correct") else FAILED


def export(api: Api, args: argparse.Namespace) -> int:
    query = f"?level={args.level}" if args.level else ""
    path = f"/api/v1/runs/{args.run}/export/{query}"
    data = api.request("GET", path)
    if not data.startswith(ZIP_MAGIC):  # a proxy's error page, say: not written over the output
        raise replies.UnexpectedReply(f"unexpected reply from {api.settings.url}{path}: not a zip archive")
    args.output.write_bytes(data)
    print(f"wrote {args.output} ({len(data)} bytes): run {args.run} as a KernelBench run folder")
    return 0


COMMANDS = {"submit": submit, "status": status, "kernel": kernel, "export": export}
# The API's field names as each command's flags, so that the site's errors name what to type.
FLAGS = {
    "submit": {"hardware": "--hardware", "problem_set": "--set", "model": "--model", "setting": "--setting",
               "name": "--name", "precision": "--precision", "organization": "--organization", "file": "PATH"},
    "kernel": {"problem": "PROBLEM", "source": "KERNEL", "hardware": "--hardware", "model": "--model", "run": "--run"},
}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        api = Api(settings(getattr(args, "url", None), getattr(args, "token", None)))
        return COMMANDS[args.command](api, args)
    except UsageError as exc:
        print(f"kbl: {exc}", file=sys.stderr)
        return USAGE
    except ApiError as exc:
        print(f"kbl: {exc.render(FLAGS.get(args.command, {}))}", file=sys.stderr)
        return API
    except TimeoutError as exc:
        print(f"kbl: {exc}", file=sys.stderr)
        return FAILED
    except KeyboardInterrupt:
        return 130
