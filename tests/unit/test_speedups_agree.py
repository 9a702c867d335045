"""The one rule for two measurements of a kernel agreeing (evaluation.results.stats.speedups_agree), used by
the GPU acceptance check and the site's pages."""

from evaluation.results.stats import interval_covers, speedup_gap, speedups_agree, speedups_within


def test_the_gap_is_taken_against_the_smaller_figure_whichever_came_first():
    assert speedup_gap(2.0, 2.2) == speedup_gap(2.2, 2.0)
    assert abs(speedup_gap(2.0, 2.2) - 0.1) < 1e-12
    assert speedup_gap(None, 2.0) is None and speedup_gap(2.0, 0.0) is None


def test_two_percent_apart_is_within_even_in_floating_point():
    assert speedups_within(1.0, 1.02)
    assert not speedups_within(1.0, 1.0201)


def test_a_missing_figure_leaves_nothing_to_disagree_on():
    assert speedups_agree(None, 3.0)


def test_only_a_host_bound_sides_interval_covers():
    # 1.12x host-bound with an interval to 9.0x covers 8.01x; the same interval on a side that is not
    # host-bound is not passed, and then the figures 615 % apart differ.
    assert speedups_agree(1.12, 8.01, a_host_bound_interval=(0.9, 9.0))
    assert speedups_agree(8.01, 1.12, b_host_bound_interval=(0.9, 9.0))
    assert not speedups_agree(1.12, 8.01)
    assert not speedups_agree(1.12, 8.01, a_host_bound_interval=(0.9, 2.0))


def test_an_interval_with_a_missing_end_covers_nothing():
    assert not interval_covers((None, 9.0), 2.0)
    assert not interval_covers(None, 2.0)
    assert not interval_covers((1.0, 3.0), None)
    assert interval_covers((1.0, 3.0), 3.0)
