"""Boards ranked by the database: only the shown rows read and made.

A board in its own order (fast_p at a standard p, best first: every standard board, the API's
leaderboard, the overview) ranks by counts each RunScore row stores (`stored.ABOVE_COLUMNS`: fast_p's
count at each standard p, of each rule and of the published figures) and by its correct count, so
the database orders the runs and pages them (over `runscore_rank_idx`, which holds every column
these queries read), and only a page's rows (and the leaders') are read, decoded and made into
`StandingRow`s. The rows, their order, their intervals and their ties are
those of `rows.level_standings` (`tests/django/test_board_ranked.py` holds them equal); a board
in any other order (another column, ascending, a p no column stores) is ranked in Python as before.

Which figure a row ranks by (`StandingRow.ranked_by`) is a condition on the stored row: published
while it has published figures and is not all measured here (0 < kernels <= measured), else what
was measured here under the board's rule. A run without a stored row on the level ranks with an
empty score, as `level_standings` gives it."""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Case, Count, F, FilteredRelation, Q, Sum, When
from django.db.models.functions import Coalesce

from evaluation.results.metrics import fast_p_key
from leaderboard.boards import scoring
from leaderboard.boards import stored as board_stored
from leaderboard.boards.scoring import RULE_BEST, STANDARD_PS
from leaderboard.models import RunQuerySet
from leaderboard.reads.board import rows as board_rows
from leaderboard.reads.board.choices import BoardFilters, LevelBoard
from leaderboard.reads.board.rows import Leaders, ListedRows, StandingRow, Standings

SCORE = "level_score"  # the alias of the run's stored row on the board's level
# A row ranked by its published figures: it has some, and not every kernel is measured here.
PUBLISHED_RANKED = Q(**{f"{SCORE}__pub_count__gt": 0}) & (
    Q(**{f"{SCORE}__kernels": 0}) | Q(**{f"{SCORE}__kernels__gt": F(f"{SCORE}__measured")})
)
MEASURED_RANKED = Q(**{f"{SCORE}__pub_count": 0}) | (
    Q(**{f"{SCORE}__kernels__gt": 0}) & Q(**{f"{SCORE}__kernels__lte": F(f"{SCORE}__measured")})
)


def _stored(column: str) -> Coalesce:
    """A stored column of the run's row on the level; 0 for a run without one (an empty score)."""
    return Coalesce(F(f"{SCORE}__{column}"), 0)


def _ranked(published: str, measured: str) -> Coalesce:
    return Coalesce(Case(When(PUBLISHED_RANKED, then=F(f"{SCORE}__{published}")), default=F(f"{SCORE}__{measured}")), 0)


class RankedRows(Standings):
    """The rows of a board in rank order, as a sequence whose slices are read from the database
    (a Paginator's object list; the API slices it): `len` is one count, a slice one ranked query of
    its rows (and the row above it, for its tie) and the reads that make them."""

    def __init__(self, filters: BoardFilters, runs: RunQuerySet, n_problems: int) -> None:
        self.filters, self.runs, self.n_problems = filters, runs, n_problems
        self.p = filters.picked_p
        self.tally = "best" if filters.rule == RULE_BEST else "s0"
        level = filters.level
        on_level = Q(scores__level=board_stored.ALL_LEVELS if level is None else level)
        with_excluded = Q(scores__with_excluded=filters.include_excluded)
        self.scored = runs.select_related(None).annotate(
            **{SCORE: FilteredRelation("scores", condition=on_level & with_excluded)}
        )
        above = board_stored.above_column
        self.ranking = self.scored.annotate(
            rank_count=_ranked(above("pub", self.p), above(self.tally, self.p)),
            rank_correct=_ranked("pub_count", f"{self.tally}_correct"),
        ).order_by("-rank_count", "-rank_correct", "pk")
        self._count: int | None = None
        self._any_published: bool | None = None

    def __len__(self) -> int:
        if self._count is None:
            self._count = self.runs.count()
        return self._count

    def __iter__(self) -> Iterator[StandingRow]:
        return iter(self[0 : len(self)])

    def __getitem__(self, index):
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            assert step == 1, "a board's rows are read in one slice"
            return self._slice(start, stop) if start < stop else []
        return self._slice(index, index + 1)[0]

    def _slice(self, start: int, stop: int) -> list[StandingRow]:
        """Rows start..stop of the ranking, with their intervals and ties (the row above start read
        for its interval only)."""
        first = max(0, start - 1)
        ranked = list(self.ranking.values_list("pk", "rank_count")[first:stop])
        shown = self.made([pk for pk, _ in ranked[start - first :]])
        board_rows.annotate_intervals(shown, self.p)
        if start > first and shown:
            above = scoring.fast_p_interval(ranked[0][1], self.n_problems)
            shown[0].tied = scoring.mark_ties([above, shown[0].interval])[1]
        return shown

    def made(self, run_ids: list[int]) -> list[StandingRow]:
        """The rows of these runs, in this order, made as `level_standings` makes them."""
        if not run_ids:
            return []
        level, include_excluded = self.filters.level, self.filters.include_excluded
        runs = self.runs.filter(pk__in=run_ids)
        scores = board_stored.stored_scores(self.filters.problem_set, runs, level, include_excluded)
        by_run = {
            run.pk: board_rows.make_row(run, level, score, self.n_problems, self.p, self.filters.rule)
            for run, score in scores
        }
        made = [by_run[pk] for pk in run_ids if pk in by_run]
        board_rows.attach_compared_entries(made, level, include_excluded)
        return made

    def leaders(self, p: float) -> Leaders:
        """`rows.leaders` over every row of the board, found by the database: the best measured
        row and the best published one at p (a standard p), and the rows partly measured."""
        if p not in STANDARD_PS:
            return board_rows.leaders(list(self), p)
        above = board_stored.above_column
        measured = self.scored.filter(MEASURED_RANKED, **{f"{SCORE}__measured__gt": 0}).order_by(
            _stored(above(self.tally, p)).desc(), _stored(f"{self.tally}_correct").desc(), "pk"
        )
        published = self.scored.filter(**{f"{SCORE}__pub_count__gt": 0}).order_by(
            _stored(above("pub", p)).desc(), _stored("pub_count").desc(), "pk"
        )
        ids = [measured.values_list("pk", flat=True).first(), published.values_list("pk", flat=True).first()]
        self._any_published = ids[1] is not None  # a published leader exists when any row has published figures
        made = {row.run.pk: row for row in self.made([pk for pk in dict.fromkeys(ids) if pk is not None])}
        not_all_measured = Q(**{f"{SCORE}__kernels": 0}) | Q(**{f"{SCORE}__kernels__gt": F(f"{SCORE}__measured")})
        partly = self.scored.filter(Q(**{f"{SCORE}__measured__gt": 0}) & not_all_measured).aggregate(
            rows=Count("pk"), measured=Sum(f"{SCORE}__measured"), kernels=Sum(f"{SCORE}__kernels")
        )
        return Leaders(
            made.get(ids[0]) if ids[0] is not None else None,
            made.get(ids[1]) if ids[1] is not None else None,
            p,
            partly["rows"],
            partly["measured"] or 0,
            partly["kernels"] or 0,
        )

    @property
    def any_published(self) -> bool:
        if self._any_published is None:
            self._any_published = self.scored.filter(**{f"{SCORE}__pub_count__gt": 0}).exists()
        return self._any_published

    def measured_rows(self) -> RankedRows:
        """The rows ranked by what was measured here, with kernels measured here (`leaders`' own)."""
        return self.only(MEASURED_RANKED & Q(**{f"{SCORE}__measured__gt": 0}))

    def only(self, condition: Q) -> RankedRows:
        """The same ranking over the rows that meet `condition` (on SCORE's columns)."""
        subset = RankedRows.__new__(RankedRows)
        subset.__dict__.update(self.__dict__)
        subset.runs = self.runs.filter(pk__in=self.scored.filter(condition).values("pk"))
        subset.scored = self.scored.filter(condition)
        subset.ranking = self.ranking.filter(condition)
        subset._count = None
        return subset


def ranked_standings(filters: BoardFilters, *, runs: RunQuerySet | None = None) -> Standings:
    """`rows.level_standings`, ranked by the database where a stored column holds the figure it
    ranks by (a standard p), else in Python (`level_standings` itself). `runs`: the runs to rank,
    when not those the filters name."""
    rank_p = filters.picked_p
    n_problems = board_rows.level_denominator(filters.problem_set, filters.level)
    if rank_p not in STANDARD_PS or n_problems == 0:
        return ListedRows(board_rows.level_standings(filters, runs=runs))
    return RankedRows(filters, board_rows.board_runs(filters) if runs is None else runs, n_problems)


def board_rows_ranked(board: LevelBoard) -> Standings:
    """A level page's rows (`rows.board_rows`): ranked by the database when the board is in its own
    order (sorted by the picked p's fast_p, best first), else sorted in Python."""
    p = board.filters.picked_p
    own_order = board.sort_key == fast_p_key(p) and board.descending
    if not own_order or p not in STANDARD_PS:
        return ListedRows(board_rows.board_rows(board))
    return ranked_standings(board.filters)
