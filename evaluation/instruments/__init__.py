"""The reviewer's instruments: checks that tell a real win from a trick, run after the timed rounds.

- ``precision``: an fp32 problem computed in lower precision (against an fp64 reference);
- ``shapes``: correctness at other sizes of the problem's constants;
- ``determinism``: two runs on the same inputs, bit for bit;
- ``roofline``: the problem's minimum bytes (inputs read, outputs written), the hardware's peak bandwidth, each side's fraction;
- ``profile``: the GPU activities of one forward of each side;
- ``phase``: runs them from the parent (``run_instruments``) within their own time budget;
- ``sanitize`` (with ``bounds``): what a process reported, rebuilt from an allow-list before it is
  stored, and again by pages and the API.

The modules other than ``phase``, ``sanitize`` and ``bounds`` hold what runs inside the sandboxed
processes (torch is passed in) and the parent's judgement of it; none imports torch at import time. See docs/evaluation.md,
"Instruments".
"""
