"""The sandboxed processes seen from their parent: one evaluation's sandbox and the confinement of
each process it starts (sandbox, isolation), one process and its channel (process, protocol,
cuda_ipc), their limits (limits), the files they leave (safe_files), the folders of dead sandboxes
(orphans), and the host's failures told apart from the code's (host_errors). What runs inside the
processes is evaluation.child."""
