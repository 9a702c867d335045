ROW = {
    "model": "M",
    "variant": "v",
    "metric": "fast_1",
    "value": 4,
    "unit": "%",
    "date": "2025-02-14",
    "source_url": "https://example.org/a",
}


def test_writes_are_throttled_per_user(token_client, ingestor, settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"writes": "2/min"}}
    client = token_client(ingestor)
    codes = [client.post("/api/v1/reported-scores/", ROW, format="json").status_code for _ in range(3)]
    assert codes[:2] != [429, 429] and codes[2] == 429


def test_reads_are_not_throttled(client, settings, db):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"writes": "1/min"}}
    assert {client.get("/api/v1/reported-scores/").status_code for _ in range(3)} == {200}
