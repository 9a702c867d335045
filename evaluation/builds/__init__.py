"""Building a kernel before it runs: the build cache's entries (entry), the build stage that compiles
off the GPU in a sandboxed process (stage) and its pool (pool), the host's shared headers (pch,
slim_headers, cu_flags), nvcc's steps (nvcc_steps), the translation units shared between builds
(units, unit_client, unit_names) and the cache's eviction (cache_evict)."""
