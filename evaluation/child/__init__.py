"""What runs inside a sandboxed process: the harness that serves its parent's requests (harness:
load, correctness, instruments; timing_requests: the timed calls), the confinement it finishes first
(confine), the clock it takes at start (clock), how it reports a failure (failures), and the audit
hook and sealed slots that watch what the kernel's code does to it (harness_guard). Started by
evaluation.sandbox.process as ``python -I -c "...main()" SPEC_JSON``."""
