"""The REST API under /api/v1/: public reads, permissioned and throttled writes, ingestion."""
