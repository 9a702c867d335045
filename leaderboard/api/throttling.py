"""Writes are throttled per user (scope "writes", rate in REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]);
reads are not."""

from __future__ import annotations

from rest_framework.permissions import SAFE_METHODS
from rest_framework.settings import api_settings
from rest_framework.throttling import UserRateThrottle


class WriteRateThrottle(UserRateThrottle):
    scope = "writes"

    def get_rate(self) -> str | None:
        # Read the rate on each request (not once at import) so that settings overrides apply.
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)

    def allow_request(self, request, view) -> bool:
        if request.method in SAFE_METHODS:
            return True
        return super().allow_request(request, view)
