from leaderboard.api.renderers import AsciiJSONRenderer, RenderedJSON
from leaderboard.models import Run
from leaderboard.reads.board.choices import BoardFilters
from leaderboard.reads.board.rows import level_standings
from problems.models import ProblemSet
from tests.rescoring import run_rescorer

URL = "/api/v1/leaderboard/"


def test_it_gives_fast_p_per_run_from_the_shared_standings(client, run):
    body = client.get(URL + "?level=1&p=1.0&hardware=cpu&set=kb").json()
    assert body["problem_set"] == "kb" and body["level"] == 1 and body["p"] == 1.0
    row = body["results"][0]
    expected = level_standings(BoardFilters(run.problem_set, 1, p=1.0, hardware=run.hardware))[0].summary
    assert row["summary"] == expected
    assert row["fast_p"] == 0.5 and row["summary"]["fast_0"] == 0.5 and row["summary"]["geomean_speedup"] == 2.0
    assert row["run"]["model"] == "model-a" and row["rank"] == 1


def test_the_p_asked_is_added_to_the_standard_set(client, run):
    row = client.get(URL + "?level=1&p=1.7").json()["results"][0]
    assert row["summary"]["fast_1.7"] == 0.5 and "fast_2" in row["summary"] and row["fast_p"] == 0.5


def test_all_levels_together_count_every_problem(client, run):
    row = client.get(URL).json()["results"][0]
    assert row["summary"]["n_problems"] == 3 and row["summary"]["fast_1"] == 1 / 3


def test_filters_by_origin_setting_and_hardware(client, run):
    assert client.get(URL + "?origin=imported").json()["results"] == []
    assert client.get(URL + "?setting=agent").status_code == 400  # no run has it
    assert len(client.get(URL + "?origin=measured&setting=one-shot").json()["results"]) == 1


def test_bad_parameters_are_400(client, run):
    assert client.get(URL + "?level=5").status_code == 400
    assert client.get(URL + "?p=-1").status_code == 400
    assert client.get(URL + "?p=nan").status_code == 400
    assert client.get(URL + "?hardware=h999").status_code == 400
    assert client.get(URL + "?set=nope").status_code == 400


def test_with_several_sets_it_answers_on_the_featured_set_unless_named(client, run):
    ProblemSet.objects.create(slug="other", name="Other")
    assert client.get(URL).json()["problem_set"] == run.problem_set.slug  # the set with runs
    assert client.get(URL + "?set=other").json()["results"] == []
    assert client.get(URL + "?set=OTHER").json()["problem_set"] == "other"  # slug or name, any case
    assert "other (Other)" in client.get(URL + "?set=nope").json()["set"]  # the error lists the sets


def test_it_costs_a_fixed_number_of_queries(client, run, django_assert_max_num_queries):
    for _ in range(4):
        Run.objects.create(model=run.model, problem_set=run.problem_set, hardware=run.hardware)
    run_rescorer()  # the runs written in this test's transaction
    client.get(URL + "?level=1")  # the first read builds the board and keeps it
    with django_assert_max_num_queries(12):
        response = client.get(URL + "?level=1")
    assert len(response.json()["results"]) == 5


def test_writes_are_not_allowed(token_client, admin_user, run):
    assert token_client(admin_user).post(URL, {}, format="json").status_code == 405


def test_kernels_judged_reward_hacks_leave_the_ranking_unless_asked(client, run, reviewer):
    from leaderboard.reviews.services import record_verdict

    record_verdict(run.kernels.get(problem__number=1), "reward_hack", by=reviewer)
    run_rescorer()
    row = client.get(URL + "?level=1").json()["results"][0]
    assert row["excluded"] == 1 and row["summary"]["fast_1"] == 0
    assert client.get(URL + "?level=1&include_excluded=true").json()["results"][0]["summary"]["fast_1"] == 0.5


def test_a_kept_board_is_sent_as_rendered_and_reads_as_its_data_in_every_form(client, run):
    first = client.get(URL + "?level=1")  # builds the board and keeps it rendered
    again = client.get(URL + "?level=1")  # the kept bytes
    assert again.status_code == 200 and again["Content-Type"] == "application/json"
    assert again.content == first.content and again.json()["results"][0]["run"]["model"] == "model-a"
    indented = client.get(URL + "?level=1", HTTP_ACCEPT="application/json; indent=4")
    assert b'\n    "problem_set": "kb"' in indented.content and indented.json() == again.json()
    page = client.get(URL + "?level=1", HTTP_ACCEPT="text/html")  # the browsable API renders the data again
    assert page.status_code == 200 and "&quot;problem_set&quot;: &quot;kb&quot;" in page.content.decode()


def test_rendered_json_is_what_the_renderer_makes_of_the_data_and_is_sent_as_it_is():
    data = {"name": "kernel é", "speedup": 1.5, "rows": [1, None]}
    rendered = RenderedJSON.of(data)
    assert (
        rendered.content
        == AsciiJSONRenderer().render(data)
        == b'{"name":"kernel \\u00e9","speedup":1.5,"rows":[1,null]}'
    )
    assert AsciiJSONRenderer().render(rendered) is rendered.content
    assert AsciiJSONRenderer().render(rendered, renderer_context={"indent": 2}) == AsciiJSONRenderer().render(
        data, renderer_context={"indent": 2}
    )
