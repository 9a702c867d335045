"""Fuzzing the API from its own OpenAPI schema (schemathesis + hypothesis), in-process through the
WSGI app: whatever the input, no 5xx.

Requests carry an admin's token so that every write path is reached, not just the 401s. Bounded:
FUZZ_EXAMPLES examples per operation and mode (positive and negative), about 1-2 minutes on two
cores. Deterministic by default (the same examples each run); set KB_FUZZ_RANDOM=1 to explore.
"""

from __future__ import annotations

import os

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hsettings
from hypothesis.errors import Unsatisfiable
from rest_framework.authtoken.models import Token
from schemathesis import GenerationMode

from config.wsgi import application


@pytest.fixture
def keep_test_connection():
    """Through the raw WSGI app, request_finished would close the database connection, and with
    it the test's transaction (PostgreSQL). Django's own test client disconnects it the same way."""
    from django.core import signals
    from django.db import close_old_connections

    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


FUZZ_EXAMPLES = int(os.environ.get("KB_FUZZ_EXAMPLES", "12"))

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


@schemathesis.serializer("text/csv")
def _csv(ctx, value):
    return value.encode("utf-8", "surrogatepass") if isinstance(value, str) else str(value).encode()


def test_no_input_makes_the_api_fail_with_a_server_error(admin_user, run, baseline, settings, keep_test_connection):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"writes": "1000000/min"}}
    settings.DEBUG_PROPAGATE_EXCEPTIONS = False
    token = Token.objects.create(user=admin_user).key
    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application)
    failures: list[str] = []
    operations = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @hsettings(
                max_examples=FUZZ_EXAMPLES,
                deadline=None,
                database=None,
                derandomize=not os.environ.get("KB_FUZZ_RANDOM"),
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            @given(case=operation.as_strategy(generation_mode=mode))
            def check(case):
                response = case.call(headers={"Authorization": f"Token {token}"})
                if response.status_code >= 500:
                    failures.append(
                        f"{response.status_code} {case.method} {case.formatted_path} {case.as_curl_command()}"[:600]
                    )

            try:
                check()
            except Unsatisfiable:
                pass  # nothing to vary in this mode (e.g. no parameters to make invalid)
    assert operations >= 15
    assert not failures, "\n".join(failures[:10])
