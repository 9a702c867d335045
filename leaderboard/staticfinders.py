"""A staticfiles finder for plotly.js, taken from the installed plotly package.

plotly (a runtime requirement) ships the matching plotly.min.js in plotly/package_data; this
finder offers it as `vendor/plotly.min.js`, so `collectstatic` copies it (whitenoise then serves
it, hashed and compressed) and the dev server and live-server tests find it. No copy lives in git,
no CDN is used, and the JS always matches the installed Python package.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.contrib.staticfiles.finders import BaseFinder
from django.core.checks import Error
from django.core.files.storage import FileSystemStorage

PREFIX = "vendor"
FILE_NAME = "plotly.min.js"
PUBLIC_PATH = f"{PREFIX}/{FILE_NAME}"


def plotly_js_path() -> Path | None:
    try:
        import plotly  # deferred: plotly is optional here; without it the page works, minus charts
    except ImportError:
        return None
    path = Path(plotly.__file__).resolve().parent / "package_data" / FILE_NAME
    return path if path.is_file() else None


class PlotlyFinder(BaseFinder):
    def check(self, **kwargs):
        if settings.SERVES_PAGES and plotly_js_path() is None:
            return [
                Error(
                    "plotly.min.js was not found in the plotly package",
                    hint="pip install plotly",
                    id="leaderboard.E001",
                )
            ]
        return []

    def find(self, path, find_all=False, **kwargs):
        find_all = kwargs.get("all", find_all)
        found = plotly_js_path() if path == PUBLIC_PATH else None
        if found is None:
            return [] if find_all else None
        return [str(found)] if find_all else str(found)

    def list(self, ignore_patterns):
        found = plotly_js_path()
        if found is None:
            return
        storage = FileSystemStorage(location=str(found.parent))
        storage.prefix = PREFIX
        yield FILE_NAME, storage
