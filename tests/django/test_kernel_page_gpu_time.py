"""The kernel page shows the device-time figure the scoring library stores on a GPU beside
KernelBench's (the speedup that times the host's dispatch too), says which sides the host held, and
why a figure was withheld; nothing for a CPU's evaluation or an incorrect kernel."""

import itertools
import re

import pytest

from leaderboard.models import Kernel
from leaderboard.reads.kernel_page import gpu_time
from tests.pagekit import evaluate, make_run, make_set, plain_static  # noqa: F401

pytestmark = pytest.mark.django_db

DEVICE = {
    "reference_ms": 0.0157,
    "kernel_ms": 0.0160,
    "speedup": 0.9816,
    "speedup_interval": [0.9282, 1.0394],
    "host_bound": {"reference": True, "kernel": False},
}


_sets = itertools.count()


def _kernel_with(device, speedup=2.5) -> Kernel:
    kernel = Kernel.objects.get(run=make_run(make_set(f"Set {next(_sets)}", levels=(1,))))
    evaluation = evaluate(kernel, speedup)
    evaluation.reference_timing = {"median": 1.0, **({"device": device} if device is not None else {})}
    evaluation.save(update_fields=["reference_timing"])
    return kernel


def _gpu_row(client, kernel: Kernel) -> str:
    html = client.get(kernel.get_absolute_url()).content.decode()
    found = re.search(r'<dd id="evaluation-gpu-time">(.*?)</dd>', html, re.S)
    return found.group(1) if found else ""


def test_the_device_figure_is_shown_with_its_interval_and_the_sides_the_host_held(client):
    row = _gpu_row(client, _kernel_with(DEVICE))
    assert "<strong>0.98x</strong>" in row and "0.93x – 1.04x" in row
    assert "kernel 0.016 ms" in row and "reference 0.0157 ms" in row
    assert "host's dispatch of the reference," in row


def test_a_withheld_figure_says_why_and_stays_escaped(client):
    row = _gpu_row(client, _kernel_with({**DEVICE, "speedup": None, "withheld": "<b>off the GPU</b>"}))
    assert "withheld: &lt;b&gt;off the GPU&lt;/b&gt;" in row and "<b>" not in row


def test_no_row_without_a_device_figure_or_for_an_incorrect_kernel(client):
    assert _gpu_row(client, _kernel_with(None)) == ""
    incorrect = _kernel_with(DEVICE, speedup=None)
    assert _gpu_row(client, incorrect) == ""


def test_stored_figures_that_are_not_numbers_read_as_missing():
    kernel = _kernel_with({"speedup": "fast", "speedup_interval": [True, "x"], "host_bound": "yes", "withheld": 7})
    shown = gpu_time(kernel.latest_evaluation)
    assert shown is not None and shown.speedup is None and shown.low is None and shown.host_bound == ()
    assert shown.withheld == ""


@pytest.mark.parametrize(
    "figures",
    [
        {"speedup": -3.0},  # not positive
        {"speedup": 0},
        {"speedup": 4e7},  # above MAX_SPEEDUP
        {"speedup": 10.0, "kernel_ms": 1e-6},  # a kernel time under the physical floor
        {"speedup": 10**400},  # past a float's range
    ],
)
def test_a_figure_no_measurement_could_give_is_not_shown(client, figures):
    kernel = _kernel_with({**DEVICE, **figures})
    shown = gpu_time(kernel.latest_evaluation)
    assert shown is not None and shown.speedup is None and shown.low is None
    row = _gpu_row(client, kernel)
    assert "<strong>" not in row and row.startswith("–")


def test_an_interval_that_does_not_hold_its_figure_is_left_out():
    shown = gpu_time(_kernel_with({**DEVICE, "speedup_interval": [1.5, 2.0]}).latest_evaluation)
    assert shown.speedup == DEVICE["speedup"] and shown.low is None and shown.high is None


def test_no_row_where_kernelbenchs_speedup_was_refused_as_implausible(client):
    kernel = _kernel_with(DEVICE)
    kernel.latest_evaluation.speedup = None  # what attempts._apply_speedup stores with implausible_speedup
    kernel.latest_evaluation.save(update_fields=["speedup"])
    assert gpu_time(Kernel.objects.get(pk=kernel.pk).latest_evaluation) is None
    assert _gpu_row(client, kernel) == ""


def test_a_huge_stored_integer_reads_as_missing_in_the_templates_filters():
    from leaderboard.templatetags.leaderboard_tags import ms, times

    assert times(10**400) == "–" and ms(10**400) == "–"
