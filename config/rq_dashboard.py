"""The django-rq dashboard (/django-rq/), behind a real permission: leaderboard.manage_queues
(superusers have it). django-rq's own check is is_staff, and a staff user with no permission could
otherwise empty or requeue the evaluation queues."""

from __future__ import annotations

from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.urls import URLPattern
from django_rq.urls import get_admin_urlpatterns, get_api_urlpatterns

PERMISSION = "leaderboard.manage_queues"


def queue_managers_only(view):
    @wraps(view)
    def guarded(request, *args, **kwargs):
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path(), "admin:login")
        if not request.user.has_perm(PERMISSION):
            raise PermissionDenied(f"the queue dashboard needs the permission {PERMISSION}")
        return view(request, *args, **kwargs)

    return guarded


# Every view, the token-capable stats.json and metrics included (no RQ_API_TOKEN is configured).
urlpatterns = get_admin_urlpatterns(view_wrapper=queue_managers_only) + [
    URLPattern(pattern.pattern, queue_managers_only(pattern.callback), pattern.default_args, pattern.name)
    for pattern in get_api_urlpatterns()
]
app_name = "django_rq"
