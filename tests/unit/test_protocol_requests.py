"""The parent's requests to the sandboxed processes (evaluation.sandbox.protocol): one dataclass a
handler, sent as one JSON object and rebuilt as the same request inside the process."""

from __future__ import annotations

import json

import pytest

from evaluation.child.harness import HANDLERS, Harness
from evaluation.sandbox.protocol import (
    REQUESTS,
    CompareRequest,
    DeviceRequest,
    ExitRequest,
    TimeRequest,
    parse_request,
)


def _through_the_pipe(message: dict) -> dict:
    return json.loads(json.dumps(dict(message, nonce="ab12")))


@pytest.mark.parametrize("cls", sorted(REQUESTS.values(), key=lambda c: c.op), ids=lambda c: c.op)
def test_every_request_comes_out_of_the_pipe_as_it_went_in(cls):
    sent = cls()
    assert parse_request(_through_the_pipe(sent.message())) == sent


def test_a_request_keeps_its_fields_and_drops_the_channels_nonce():
    sent = DeviceRequest(seeds=[3, 1, 2], spot_seed=7, dispatch_us=12.5)
    message = _through_the_pipe(sent.message())
    assert message["op"] == "device" and message["nonce"] == "ab12"
    assert parse_request(message) == sent
    compare = CompareRequest(atol=1e-4, rtol=1e-4, scale_check=False, ipc_layout=[{"shape": [2, 2]}], fp64=True)
    assert parse_request(_through_the_pipe(compare.message())) == compare


def test_an_unknown_op_is_refused_and_an_unknown_field_left_out():
    with pytest.raises(KeyError):
        parse_request({"op": "format_disk"})
    assert parse_request({"op": "time", "seeds": [1], "made_up": True}) == TimeRequest(seeds=[1])


def test_every_request_but_exit_has_a_handler_in_the_harness():
    assert set(HANDLERS) | {ExitRequest.op} == set(REQUESTS)
    assert all(callable(getattr(Harness, name)) for name in HANDLERS.values())


def test_settle_drops_what_correctness_kept():
    """The settle before timing (evaluation.child.timing_requests.settle): the outputs kept for the
    comparison and the reuse check, their pointers, the shared buffer and inputs made ahead all go,
    so that on a card the processes timed side by side hold nothing idle (on an H100 a process of an
    8 GB problem kept tens of GB, and the other ran out of memory)."""
    released = []

    class Kept:
        device = "cpu"
        last_outs = ["reference outputs"]
        prev_out_ref, prev_out_ptrs = ["kernel outputs"], [1234]
        _prepared = {7: ["inputs"]}

        def _release_shared(self):
            released.append(True)

    kept = Kept()
    assert Harness.settle(kept, parse_request({"op": "settle"})) == {"ok": True}
    assert released and kept.last_outs is None and kept.prev_out_ref is None
    assert kept.prev_out_ptrs == [] and kept._prepared == {}
