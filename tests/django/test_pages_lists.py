import pytest

from tests.pagekit import count_queries, make_model, make_reported, make_set, plain_static  # noqa: F401

pytestmark = pytest.mark.django_db


def test_it_lists_models(client):
    make_model("Listed Model")
    assert b"Listed Model" in client.get("/models/").content


def test_it_lists_problems_by_level(client):
    make_set(levels=(1, 2))
    html = client.get("/problems/?level=2").content.decode()
    assert "Op_2_1" in html and "Op_1_1" not in html


def test_it_lists_reported_scores_by_variant(client):
    make_reported(make_model("A"), variant="Only this")
    make_reported(make_model("B"), variant="Not this")
    html = client.get("/reported/?variant=Only+this").content.decode()
    assert "Only this" in html and "Not this" not in html


def test_it_searches_models_and_problems(client):
    make_model("Searchable")
    make_set(levels=(1,))
    assert b"Searchable" in client.get("/search/?q=search").content
    assert b"Op_1_1" in client.get("/search/?q=op_1").content


def test_it_paginates_models(client):
    for index in range(55):
        make_model(f"M{index:02d}")
    assert b"page 1 of 2" in client.get("/models/").content


@pytest.mark.parametrize("url", ["/models/", "/problems/", "/reported/", "/search/?q=m"])
def test_it_costs_the_same_queries_with_more_rows(client, url):
    make_set(name="S1", levels=(1, 2))
    make_reported(make_model("m0"))
    before = count_queries(client, url)
    make_set(name="S2", levels=(1, 1, 3))
    for index in range(5):
        make_reported(make_model(f"m{index + 1}"), variant=f"v{index}")
    assert count_queries(client, url) == before


def test_it_shows_a_friendly_404(client):
    response = client.get("/no/such/page/")
    assert response.status_code == 404 and b"There is no such page" in response.content
