"""Who is asking: the client's address as this site can trust it.

A client can write any X-Forwarded-For it likes, so the header counts only as far as our own
proxies wrote it: with TRUSTED_PROXY_COUNT = n > 0, the n-th entry from the right is the address
the outermost trusted proxy saw (each proxy appends the peer it talked to; entries further left
came from the client and are ignored). With n = 0 (the default: gunicorn serves clients directly)
the header is ignored and REMOTE_ADDR, the socket's peer, is the client.

IPv6 clients are keyed by their /64: one host usually holds the whole prefix, so a limit keyed
by the full address would be a limit per chosen address.
"""

from __future__ import annotations

import hmac
import ipaddress

from django.conf import settings
from django.http import HttpRequest

UNKNOWN = "unknown"


def _parse(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip())
    except ValueError:
        return None


def forwarded_address(meta: dict, trusted_proxies: int) -> str:
    """The client's address from a request's META, trusting `trusted_proxies` proxies."""
    remote = meta.get("REMOTE_ADDR", "") or ""
    if trusted_proxies <= 0:
        return remote
    entries = (meta.get("HTTP_X_FORWARDED_FOR") or "").split(",")
    if len(entries) < trusted_proxies:
        return remote  # a request that did not come through every proxy (e.g. a direct probe)
    return entries[-trusted_proxies].strip()


def client_address(request: HttpRequest) -> str:
    """The address limits are keyed by: a normalised IPv4 address, an IPv6 /64, or "unknown"."""
    address = _parse(forwarded_address(request.META, settings.TRUSTED_PROXY_COUNT))
    if address is None:
        return UNKNOWN
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network(f"{address}/64", strict=False))
    return str(address)


def is_private_client(request: HttpRequest) -> bool:
    """Whether the (trusted) client address lies in one of settings.PRIVATE_NETWORKS."""
    address = _parse(forwarded_address(request.META, settings.TRUSTED_PROXY_COUNT))
    if address is None:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address in ipaddress.ip_network(network) for network in settings.PRIVATE_NETWORKS)


def is_operator(request: HttpRequest) -> bool:
    """Whether the request may read operations data (/metrics; /healthz's timings and errors): it
    carries `Authorization: Bearer <METRICS_TOKEN>`, or (METRICS_ALLOW_PRIVATE) it comes from one
    of PRIVATE_NETWORKS, as Prometheus inside the private network does."""
    token = settings.METRICS_TOKEN
    if token:
        sent = request.META.get("HTTP_AUTHORIZATION", "")
        if hmac.compare_digest(sent.encode("utf-8", "replace"), f"Bearer {token}".encode()):
            return True
    return settings.METRICS_ALLOW_PRIVATE and is_private_client(request)
