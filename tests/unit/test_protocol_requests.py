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
