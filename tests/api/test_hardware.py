def test_it_lists_hardware_with_its_queue(client, hardware):
    body = client.get("/api/v1/hardware/").json()
    assert body["results"][0]["slug"] == "cpu" and body["results"][0]["queue_name"] == "eval-cpu"


def test_detail_by_slug(client, hardware):
    assert client.get("/api/v1/hardware/cpu/").json()["kind"] == "cpu"
    assert client.get("/api/v1/hardware/h200/").status_code == 404


def test_it_is_read_only(token_client, admin_user, hardware):
    assert token_client(admin_user).delete("/api/v1/hardware/cpu/").status_code == 405
