"""What an evaluation reports and how it is scored: the result and its configuration (types), the
benchmark's metrics and statistics (metrics, stats), the code and hardware that measured it
(harness_id, hardware) and KernelBench's own format (kernelbench_format)."""
