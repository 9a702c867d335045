"""A problem's sizes found ahead of its evaluation, on the CPU (evaluation/phases/sizes_ahead.py):
kept where a fresh worker process finds them, found once, and nothing kept for a problem whose
tensors the meta device cannot make without a GPU (its evaluation finds them on the device)."""

from __future__ import annotations

from evaluation.phases import problem_facts
from evaluation.phases.problem_facts import ProblemFacts, ProblemKey, problem_digest
from evaluation.phases.sizes_ahead import find_sizes
from evaluation.results.types import EvaluationConfig
from tests.evaluation.helpers import ROOT

GELU = (ROOT / "problems" / "catalogue" / "level1" / "3_GELU.py").read_text()

ON_CUDA = GELU.replace("x = torch.randn(batch_size, dim)", "x = torch.randn(batch_size, dim, device='cuda')")


def test_sizes_found_ahead_are_kept_for_every_worker_and_found_once(tmp_path, monkeypatch):
    monkeypatch.setattr(problem_facts, "FACTS", ProblemFacts())
    monkeypatch.setattr("evaluation.phases.sizes_ahead.FACTS", problem_facts.FACTS)
    cfg = EvaluationConfig(device="cuda", build_cache_dir=str(tmp_path))
    assert find_sizes(GELU, cfg) == "found"
    fresh = ProblemFacts()  # another worker's process: from disk
    sizes = fresh.get(ProblemKey(problem_digest(GELU), cfg), "sizes")
    assert sizes is not None and sizes["input_bytes"] > 0 and sizes["output_bytes"] == sizes["input_bytes"]
    assert find_sizes(GELU, cfg) == "kept"


def test_a_problem_that_places_its_tensors_on_cuda_itself_is_left_to_its_evaluation(tmp_path, monkeypatch):
    assert ON_CUDA != GELU
    monkeypatch.setattr("evaluation.phases.sizes_ahead.FACTS", ProblemFacts())
    cfg = EvaluationConfig(device="cuda", build_cache_dir=str(tmp_path))
    assert find_sizes(ON_CUDA, cfg).startswith("not found")
    assert ProblemFacts().get(ProblemKey(problem_digest(ON_CUDA), cfg), "sizes") is None
