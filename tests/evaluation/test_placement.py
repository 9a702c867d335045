"""A round's new tensor places (evaluation/child/timing_requests.py, _re_place) are drawn only where the
problem's inputs and outputs are small: above PLACE_MAX_TENSOR_MB the release and the new places slowed
the memory-bound calls that followed (benchmarks/results/two_modes_5a37961/). The parent decides once,
from the reference's sizes, for every process alike (evaluation/phases/timing.py, keeps_places). The
moves themselves need a GPU; here torch is a stand-in that records what the placement asked of it."""

import json
from types import SimpleNamespace

import pytest

from evaluation.child.timing_requests import TimingRequests
from evaluation.phases import timing
from evaluation.phases.timing import PLACE_MAX_TENSOR_MB, keeps_places
from evaluation.sandbox.protocol import PlaceRequest, parse_request


@pytest.mark.parametrize(
    ("environment", "keep"),
    [
        ({"input_mb": 6144.0, "output_mb": 6144.0}, True),  # level 1's ReLU
        ({"input_mb": PLACE_MAX_TENSOR_MB, "output_mb": 0.1}, True),
        ({"input_mb": PLACE_MAX_TENSOR_MB / 2, "output_mb": PLACE_MAX_TENSOR_MB / 2}, False),  # at the bound
        ({"input_mb": 64.0, "output_mb": 544.6}, False),  # a ConvTranspose3d problem
        ({"input_mb": 3000.0, "output_mb": None}, True),  # outputs unknown: about the inputs' size
        ({"input_mb": 1000.0, "output_mb": None}, False),
        ({"input_mb": None, "output_mb": None}, False),  # sizes unknown: re-placed, as before the bound
        ({}, False),
    ],
)
def test_places_are_kept_only_for_problems_whose_tensors_pass_the_bound(environment, keep):
    assert keeps_places(environment) is keep


@pytest.mark.parametrize(
    ("environment", "keep"),
    [({"input_mb": 6144.0, "output_mb": 6144.0}, True), ({"input_mb": 64.0, "output_mb": 544.6}, False)],
)
def test_the_parent_sends_one_decision_to_every_process(monkeypatch, environment, keep):
    sent = []
    monkeypatch.setattr(timing, "_ask_every_process", lambda pair, msg: sent.append(msg))
    timing._place(SimpleNamespace(res=SimpleNamespace(environment=environment)), seed=7, input_seed=11)
    assert sent == [PlaceRequest(seed=7, input_seed=11, keep_places=keep)]


@pytest.mark.parametrize("keep", [True, False])
def test_the_decision_reaches_the_process_through_the_protocol(keep):
    request = PlaceRequest(seed=7, input_seed=11, keep_places=keep)
    assert parse_request(json.loads(json.dumps(request.message()))) == request


def _process() -> tuple[TimingRequests, list[str]]:
    asked: list[str] = []

    def empty(n: int, **_kw: object) -> object:
        asked.append("pad")
        return object()

    torch = SimpleNamespace(empty=empty, uint8="uint8", nn=SimpleNamespace(Module=type("Module", (), {})))
    proc = object.__new__(TimingRequests)
    proc.torch, proc.model, proc._first_places, proc._place_pad = torch, object(), None, None
    proc.device, proc.disabled = "cuda", set()
    proc._empty_cache = lambda: asked.append("release")  # the harness's sealed slot on a GPU
    proc.gen_inputs = lambda seed: asked.append(f"inputs {seed}") or []
    proc._timed_call = lambda inputs: asked.append("untimed call")
    return proc, asked


def test_a_process_told_to_keep_its_places_only_makes_the_untimed_call():
    proc, asked = _process()
    proc._place_pad = pad = object()
    assert proc.place(PlaceRequest(seed=7, input_seed=11, keep_places=True)) == {"ok": True}
    assert asked == ["inputs 11", "untimed call"]
    assert proc._place_pad is pad


def test_a_process_not_told_to_keep_them_is_released_and_placed_anew():
    proc, asked = _process()
    assert proc.place(PlaceRequest(seed=7, input_seed=11)) == {"ok": True}
    assert asked == ["release", "pad", "inputs 11", "untimed call"]
    assert proc._place_pad is not None
