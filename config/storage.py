"""Static files storage that keeps pages up before `collectstatic` has run."""

from __future__ import annotations

import logging

from whitenoise.storage import CompressedManifestStaticFilesStorage

logger = logging.getLogger(__name__)


class ForgivingManifestStorage(CompressedManifestStaticFilesStorage):
    """Hashed, compressed names from the manifest when there is one (production, `make run`);
    the plain name otherwise, served by whitenoise from the finders, so a bare `runserver` or a
    test run does not answer every page with a 500 for want of a manifest entry."""

    manifest_strict = False

    def stored_name(self, name: str) -> str:
        try:
            return super().stored_name(name)
        except ValueError:
            logger.debug("static file %s is not collected; serving it under its plain name", name)
            return name
