"""A round's new places (evaluation/child/timing_requests.py, _re_place) are drawn only while the
process holds little device memory: above PLACE_MAX_RESERVED_BYTES the release and the new places
slowed the memory-bound calls that followed (benchmarks/results/two_modes_5a37961/). The moves
themselves need a GPU; here torch is a stand-in that records what the placement asked of it."""

from types import SimpleNamespace

from evaluation.child.timing_requests import PLACE_MAX_RESERVED_BYTES, TimingRequests


def _process(reserved: int) -> tuple[TimingRequests, list[str]]:
    asked: list[str] = []
    cuda = SimpleNamespace(memory_reserved=lambda: reserved, empty_cache=lambda: asked.append("release"))

    def empty(n: int, **_kw: object) -> object:
        asked.append("pad")
        return object()

    torch = SimpleNamespace(cuda=cuda, empty=empty, uint8="uint8", nn=SimpleNamespace(Module=type("Module", (), {})))
    proc = object.__new__(TimingRequests)
    proc.torch, proc.model, proc._first_places, proc._place_pad = torch, object(), None, None
    return proc, asked


def test_a_process_under_the_bound_is_released_and_placed_anew():
    proc, asked = _process(PLACE_MAX_RESERVED_BYTES // 2)
    proc._re_place(7)
    assert asked == ["release", "pad"]
    assert proc._place_pad is not None


def test_a_process_over_the_bound_keeps_its_places():
    proc, asked = _process(PLACE_MAX_RESERVED_BYTES + 1)
    proc._place_pad = pad = object()
    proc._re_place(7)
    assert asked == []
    assert proc._place_pad is pad
