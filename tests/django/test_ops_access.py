"""/metrics and /healthz's details are for operators (leaderboard.ops.clients.is_operator): the
private network or a bearer token. Issue 19 case 14: per-view request counts showed admin activity
and /healthz check latencies to anyone."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db
PUBLIC, PRIVATE = "203.0.113.5", "10.0.0.5"


def _get(path: str, address: str, **headers: str):
    return Client().get(path, REMOTE_ADDR=address, **headers)


def test_metrics_refuse_a_public_address_and_say_how_to_get_in():
    response = _get("/metrics", PUBLIC)
    assert response.status_code == 403 and b"METRICS_TOKEN" in response.content
    assert b"kb_http_requests" not in response.content


def test_metrics_answer_the_private_network():
    response = _get("/metrics", PRIVATE)
    assert response.status_code == 200 and b"kb_evaluations" in response.content


def test_a_token_lets_in_from_anywhere_and_can_be_the_only_way(settings):
    settings.METRICS_TOKEN, settings.METRICS_ALLOW_PRIVATE = "s3cret-token", False
    assert _get("/metrics", PUBLIC, HTTP_AUTHORIZATION="Bearer s3cret-token").status_code == 200
    assert _get("/metrics", PUBLIC, HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    assert _get("/metrics", PRIVATE).status_code == 403


def test_behind_the_proxy_the_clients_address_decides_not_the_proxys(settings):
    settings.TRUSTED_PROXY_COUNT = 1
    assert _get("/metrics", "127.0.0.1", HTTP_X_FORWARDED_FOR=PUBLIC).status_code == 403
    assert _get("/metrics", "127.0.0.1", HTTP_X_FORWARDED_FOR=f"{PRIVATE}, {PUBLIC}").status_code == 403  # forged
    assert _get("/metrics", "127.0.0.1", HTTP_X_FORWARDED_FOR=PRIVATE).status_code == 200


def test_healthz_tells_the_public_ok_or_not_without_timings_or_errors():
    body = _get("/healthz", PUBLIC).json()
    assert set(body) <= {"status", "checks", "evaluation_hosts", "boards"}
    assert all(set(check) == {"ok"} for check in body["checks"].values()), body
    assert set(body.get("evaluation_hosts", {"ok": None})) == {"ok"}, body  # no host names
    assert set(body.get("boards", {"ok": None})) == {"ok"}, body  # no run ids or errors


def test_healthz_gives_operators_timings_and_errors():
    body = _get("/healthz", PRIVATE).json()
    assert all("ms" in check for check in body["checks"].values()), body
