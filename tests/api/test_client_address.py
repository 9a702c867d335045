"""The address limits are keyed by (leaderboard/ops/clients.py) comes from what a client cannot
forge: REMOTE_ADDR, or the X-Forwarded-For entry our own proxy wrote. Issue 19 case 4: a new
X-Forwarded-For per request was a new allowance per request."""

from __future__ import annotations

from django.test import RequestFactory
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from leaderboard.api.throttling import WriteRateThrottle
from leaderboard.ops.clients import client_address

# Header values as a client may send them: any printable text, lists of addresses, garbage.
HEADER_TEXT = st.text(st.characters(min_codepoint=32, max_codepoint=0x2FF), max_size=80)
ADDRESSES = st.one_of(st.ip_addresses().map(str), HEADER_TEXT)
FORWARDED = st.one_of(HEADER_TEXT, st.lists(ADDRESSES, max_size=6).map(", ".join))
PROPERTY = hsettings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _ident(remote: str, forwarded: str | None, **headers: str) -> str:
    meta = {"REMOTE_ADDR": remote, **headers}
    if forwarded is not None:
        meta["HTTP_X_FORWARDED_FOR"] = forwarded
    request = RequestFactory().post("/sign-in/", **meta)
    return WriteRateThrottle().get_ident(request)


@PROPERTY
@given(forwarded=FORWARDED, real=FORWARDED)
def test_without_trusted_proxies_the_key_is_the_socket_peer_whatever_the_headers(settings, forwarded, real):
    settings.TRUSTED_PROXY_COUNT = 0
    assert _ident("198.51.100.4", forwarded, HTTP_X_REAL_IP=real, HTTP_FORWARDED=f"for={real}") == "198.51.100.4"


@PROPERTY
@given(forged=st.lists(ADDRESSES, max_size=6), peer=st.ip_addresses(v=4).map(str))
def test_behind_one_proxy_the_key_is_the_entry_the_proxy_wrote(settings, forged, peer):
    """The proxy writes the peer it saw as the last entry (the shipped nginx replaces the header;
    one that appends leaves the client's entries in front): the rightmost entry decides."""
    settings.TRUSTED_PROXY_COUNT = 1
    forwarded = ", ".join([*forged, peer])
    assert _ident("127.0.0.1", forwarded) == peer


@PROPERTY
@given(forged=st.lists(ADDRESSES, min_size=1, max_size=6))
def test_behind_two_proxies_the_entry_the_outer_proxy_wrote_decides(settings, forged):
    settings.TRUSTED_PROXY_COUNT = 2
    assert _ident("10.0.0.2", ", ".join([*forged, "203.0.113.9", "10.0.0.1"])) == "203.0.113.9"


def test_a_request_that_skipped_the_proxy_is_keyed_by_its_peer(settings):
    settings.TRUSTED_PROXY_COUNT = 2
    assert _ident("192.0.2.8", "203.0.113.9") == "192.0.2.8"


def test_ipv6_clients_are_keyed_by_their_64_prefix(settings):
    settings.TRUSTED_PROXY_COUNT = 0
    assert _ident("2001:db8:1:2::1", None) == _ident("2001:db8:1:2:ffff::9", None) == "2001:db8:1:2::/64"
    assert _ident("::ffff:192.0.2.1", None) == "192.0.2.1"


def test_an_entry_that_is_not_an_address_is_unknown(settings):
    settings.TRUSTED_PROXY_COUNT = 1
    assert client_address(RequestFactory().get("/", HTTP_X_FORWARDED_FOR="1.2.3.4, evil")) == "unknown"


def test_anonymous_sign_ins_with_a_new_forwarded_for_each_are_still_throttled(client, settings, db):
    """The repro of case 4: a new X-Forwarded-For per request; the third POST at 2/min is a 429."""
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"writes": "2/min"}}
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast; not what is tested
    codes = [
        client.post("/sign-in/", {"username": "x", "password": "y"}, HTTP_X_FORWARDED_FOR=f"10.9.8.{i}").status_code
        for i in range(3)
    ]
    assert codes[2] == 429 and 429 not in codes[:2]
