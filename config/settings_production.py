"""Production settings: HTTPS only, secret key from the environment.

Use with DJANGO_SETTINGS_MODULE=config.settings_production behind a TLS-terminating proxy.
`python manage.py check --deploy` reports nothing under these settings (with REDIS_URL set: the
write limit's cache must be shared by every process, kb.W010).
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from config.env import env_bool, env_int, env_str
from config.middleware import PRODUCTION_POLICY
from config.settings import *  # noqa: F403

if not env_str("SECRET_KEY"):
    raise ImproperlyConfigured("SECRET_KEY must be set in the environment in production")
SECRET_KEY = env_str("SECRET_KEY")
DEBUG = False
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
# Load balancers and Prometheus probe these over plain HTTP inside the private network.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
# Content-Security-Policy on every response (config/middleware.py says why each source is allowed).
CONTENT_SECURITY_POLICY = env_str("CONTENT_SECURITY_POLICY", PRODUCTION_POLICY)
