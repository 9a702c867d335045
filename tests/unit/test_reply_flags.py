"""Flags a sandboxed process reports are taken bounded (evaluation.phases.session.Pair.merge_flags): the
kernel's code shares the process that writes the kernel's replies, so a hostile reply may carry any
number of flags with any text. It can only flag itself, but must not store megabytes or odd codes."""

from __future__ import annotations

from evaluation.phases.session import MAX_FLAG_MESSAGE, MAX_FLAGS_PER_REPLY, Pair
from evaluation.results.types import EvaluationConfig, EvaluationResult
from evaluation.sandbox.protocol import Reply


def test_a_hostile_reply_adds_only_a_few_short_flags_of_the_vocabularys_shape():
    pair = Pair(EvaluationConfig(device="cpu"), EvaluationResult(), None, None, 0, 0.0)  # type: ignore[arg-type]
    flags = {"mutated_inputs": "x" * 100_000, "<script>": "no", "Caps": "no", "": "no"}
    flags |= {f"spam_{n}": "m" for n in range(10_000)}
    pair.merge_flags(Reply(ok=True, flags=flags))
    codes = pair.res.flag_codes
    assert codes[0] == "mutated_inputs" and len(pair.res.flags[0]["message"]) == MAX_FLAG_MESSAGE
    assert len(codes) <= MAX_FLAGS_PER_REPLY and not {"<script>", "Caps", ""} & set(codes)
