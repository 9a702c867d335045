"""The REST API under /api/v1/: public reads, permissioned and throttled writes, ingestion.

One module per resource (problems, labs, runs, kernels, evaluations, reported_scores, launch_posts,
reviews, submissions, leaderboard), each with its serializers and its viewset or view; urls.py
wires them. Shared: base (the read-only viewset), common (body caps, query parameters), imports
(what the ingesting endpoints share), permissions, parsers, renderers, throttling.
"""
