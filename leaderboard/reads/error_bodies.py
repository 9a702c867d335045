"""An error in the kind of body the request asked for: a script that downloads a board
(`?export=csv`, `?export=json`) or reads the API must never be handed an HTML page, which it would
save as data or fail to parse. Pages keep their HTML errors (the callers render those)."""

from __future__ import annotations

import csv
import io

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

CSV_TYPE = "text/csv; charset=utf-8"


def error_in_kind(request: HttpRequest, detail: str, status: int) -> HttpResponse | None:
    """`detail` as the JSON or CSV body this request reads (the API and `?export=json`: JSON;
    `?export=csv`: a CSV of one `error` column), with `status`; None for a page."""
    export = request.GET.get("export")
    if request.path.startswith("/api/") or export == "json":
        return JsonResponse({"detail": detail}, status=status)
    if export == "csv":
        text = io.StringIO()
        csv.writer(text).writerows([["error"], [detail]])
        return HttpResponse(text.getvalue(), status=status, content_type=CSV_TYPE)
    return None


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler404 (config/urls.py): a download's or the API's 404 in its own kind, a page's as Django's."""
    return error_in_kind(request, "Not found.", 404) or defaults.page_not_found(request, exception)
