from leaderboard.models import Lab, LanguageModel


def test_it_lists_labs(client, model):
    assert client.get("/api/v1/labs/").json()["results"] == [{"slug": "lab-a", "name": "Lab A", "website": ""}]
    assert client.get("/api/v1/labs/lab-a/").status_code == 200


def test_it_lists_models_with_their_lab(client, model):
    row = client.get("/api/v1/models/").json()["results"][0]
    assert row["slug"] == "model-a" and row["lab"] == "lab-a" and row["lab_name"] == "Lab A"


def test_models_filter_by_lab_and_search(client, model):
    LanguageModel.objects.create(name="Other", lab=Lab.objects.create(name="Lab B"))
    assert client.get("/api/v1/models/?lab=lab-b").json()["count"] == 1
    assert client.get("/api/v1/models/?search=model").json()["count"] == 1
    assert client.get("/api/v1/models/nope/").status_code == 404


def test_a_model_without_a_lab_shows_null(client, db):
    LanguageModel.objects.create(name="Orphan")
    assert client.get("/api/v1/models/orphan/").json()["lab"] is None


def test_models_list_in_a_fixed_number_of_queries(client, model, django_assert_max_num_queries):
    for i in range(5):
        LanguageModel.objects.create(name=f"M{i}", lab=Lab.objects.create(name=f"L{i}"))
    with django_assert_max_num_queries(3):
        client.get("/api/v1/models/")


def test_models_are_read_only(token_client, admin_user, model):
    assert token_client(admin_user).post("/api/v1/models/", {"name": "x"}, format="json").status_code == 405
