"""The phases of one evaluation, in the order the runner takes them: static checks on the source
(static_checks, backends), correctness trials (correctness, compare, seeds), timing (timing,
host_bound), with what they share (session); and a problem's own check (problem_check)."""
