from django.core.checks import run_checks
from django.test import override_settings


def check_ids() -> set[str]:
    return {message.id for message in run_checks()}


def test_the_default_configuration_passes():
    assert not {i for i in check_ids() if i.startswith("kb.")}


@override_settings(REDIS_URL="http://127.0.0.1:6379")
def test_a_non_redis_url_is_an_error():
    assert "kb.E001" in check_ids()


@override_settings(EVAL_QUEUES=["eval-h200", "gpu queue"])
def test_a_badly_named_queue_is_an_error():
    assert "kb.E002" in check_ids()


@override_settings(REQUEST_BODY_MAX_BYTES=1_000_000)
def test_a_site_body_cap_below_a_route_cap_is_a_warning():
    assert "kb.W002" in check_ids()


def test_a_missing_plotly_fails_the_checks_only_where_pages_are_served(monkeypatch):
    from leaderboard import staticfinders

    assert "leaderboard.E001" not in check_ids()  # installed here
    monkeypatch.setattr(staticfinders, "plotly_js_path", lambda: None)
    assert "leaderboard.E001" in check_ids()
    with override_settings(SERVES_PAGES=False):  # a GPU host's workers and commands: no pages, no plotly
        assert "leaderboard.E001" not in check_ids()
