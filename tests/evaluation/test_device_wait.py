"""The device-time call's GPU-side wait: a call whose wait ran out before the host had queued the
forward is made again behind a longer wait (evaluation/child/harness.py, held_call). The wait itself needs
a GPU (tests/evaluation/test_gpu_timing.py); here the calls are stand-ins that say whether a wait of
the given length held, as the start event's query does on the GPU."""

from evaluation.child.timing_requests import DEVICE_SLACK_MAX_US, DEVICE_TRIES, TimedCall, held_call


def _calls_held_from(needed_us: float, waits: list[float]):
    def call_with_wait(us: float) -> TimedCall:
        waits.append(us)
        return TimedCall(1000, 2000, 500, us >= needed_us, object())

    return call_with_wait


def test_a_wait_that_held_is_not_repeated():
    waits: list[float] = []
    call, slack, retries = held_call(_calls_held_from(100.0, waits), 150.0)
    assert (call.queued_ahead, slack, retries, waits) == (True, 150.0, 0, [150.0])


def test_a_wait_that_ran_out_doubles_until_it_holds():
    waits: list[float] = []
    call, slack, retries = held_call(_calls_held_from(500.0, waits), 150.0)
    assert waits == [150.0, 300.0, 600.0]
    assert (call.queued_ahead, slack, retries) == (True, 600.0, 2)


def test_tries_are_bounded_and_the_last_call_says_it_did_not_hold():
    waits: list[float] = []
    call, _slack, retries = held_call(_calls_held_from(1e9, waits), 150.0)
    assert len(waits) == DEVICE_TRIES and retries == DEVICE_TRIES - 1
    assert not call.queued_ahead


def test_the_wait_never_exceeds_its_cap():
    waits: list[float] = []
    held_call(_calls_held_from(1e9, waits), DEVICE_SLACK_MAX_US * 0.75)
    assert waits == [DEVICE_SLACK_MAX_US * 0.75, DEVICE_SLACK_MAX_US]
