"""Operations: /healthz, the Prometheus metrics endpoint, request counting, structured logs."""
