"""Small helpers the API views share: request size caps and query parameters."""

from __future__ import annotations

import math

from django.conf import settings
from rest_framework import status
from rest_framework.exceptions import APIException, ValidationError


class PayloadTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "Request body too large."
    default_code = "too_large"


def table_max_bytes() -> int:
    """Cap on a JSON or CSV body of reported scores or launch posts."""
    return settings.API_TABLE_MAX_BYTES


def run_upload_max_bytes() -> int:
    """Cap on an uploaded run (zip or JSON), compressed."""
    return settings.RUN_UPLOAD_MAX_BYTES


def submission_max_bytes() -> int:
    # JSON escaping can double a source's size; leave room for the other fields.
    return 2 * settings.KERNEL_SOURCE_MAX_BYTES + 64_000


def check_body_size(request, limit: int) -> None:
    """Refuse a body larger than `limit` bytes before anything reads it."""
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise ValidationError({"detail": "Content-Length is not a number."}) from None
    if length > limit:
        raise PayloadTooLarge(f"Request body is {length} bytes; the limit here is {limit} bytes.")


MAX_ID = 2**63 - 1  # the largest value of a BigAutoField


def query_int(request, name: str, *, low: int | None = None, high: int | None = MAX_ID) -> int | None:
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ValidationError({name: f"{raw!r} is not a whole number."}) from None
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"{low}-{high}" if high is not None else f">= {low}"
        raise ValidationError({name: f"{value} is out of range ({bounds})."})
    return value


def query_float(request, name: str, *, low: float = 0.0, high: float = 1e6) -> float | None:
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ValidationError({name: f"{raw!r} is not a number."}) from None
    if not math.isfinite(value) or not low <= value <= high:
        raise ValidationError({name: f"{raw!r} is out of range ({low:g}-{high:g})."})
    return value


def query_bool(request, name: str) -> bool | None:
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return None
    lowered = raw.lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise ValidationError({name: f"{raw!r} is not true or false."})


def query_choice(request, name: str, choices) -> str | None:
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return None
    values = [value for value, _ in choices]
    if raw not in values:
        raise ValidationError({name: f"{raw!r} is not one of {', '.join(values)}."})
    return raw


def query_text(request, name: str) -> str | None:
    raw = request.query_params.get(name)
    # NUL and other control characters never get here: config.middleware.reject_control_characters
    # answers 400 for every query parameter of pages and API.
    return raw or None
