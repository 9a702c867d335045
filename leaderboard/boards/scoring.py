"""How one run's kernels of one level become a leaderboard row: KernelBench's own rules first.

Pure Python over plain values (no queries), shared by the on-the-fly reference computation
(`leaderboard.reads.board.rows.live_level_standings`) and the stored read model
(`leaderboard.boards`), so both can only ever agree.

The rules:

- **Default: KernelBench's rules** (`src/kernelbench/score.py`, `scripts/benchmark_eval_analysis.py`):
  each problem counts by its **sample 0** only; a problem without sample 0 counts as failed.
  fast_p = (# problems whose sample 0 is correct with speedup > p) / (# problems in the level),
  geomean = geometric mean of the speedups of correct sample-0 kernels.
- **fast_0 (correctness) never depends on baselines:** a correct kernel without a speedup (imported
  without a baseline on its hardware) counts as correct, is "correct-unscored" for every p > 0,
  and rows say how many there are. (KernelBench's analysis drops problems without a baseline from
  the fast_p denominator; here the denominator is always the level's problems, as in DESIGN.md.)
- **Best-of-n** (the best correct sample per problem, an oracle) and **pass@1** (the unbiased
  estimator of `evaluation.results.metrics.pass_at_k`, averaged over the level's problems) are extra,
  labelled numbers (keys prefixed ``best_`` and ``pass_at_1``), never the default.
- **Published figures** (a speedup someone else published for a kernel, on their GPU) are tallied
  apart (`LevelScore.published`: per problem the best published speedup of its counted kernels),
  never mixed into the tallies measured here; rows say which of the two they rank by
  (leaderboard.reads.board.rows).
"""

from __future__ import annotations

import bisect
import math
import random
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from evaluation.results.metrics import DEFAULT_PS, fast_p_key, pass_at_k

STANDARD_PS: tuple[float, ...] = tuple(DEFAULT_PS)
RULE_SAMPLE0 = "sample0"
RULE_BEST = "best"
RULES: dict[str, str] = {
    RULE_SAMPLE0: "KernelBench's rule: sample 0 of each problem",
    RULE_BEST: "best-of-n: the best correct sample of each problem",
}
# Bootstrap resamples for the fast_p intervals: 1,000 keeps the percentile bounds
# stable to about a point at a fraction of 2,000's cost.
INTERVAL_RESAMPLES = 1000


@dataclass(frozen=True)
class KernelFacts:
    """What scoring needs of one kernel: its latest evaluation and its review state."""

    problem_id: int
    sample_index: int
    compiled: bool | None
    correct: bool | None
    speedup: float | None
    flagged: bool = False
    unreviewed: bool = False
    excluded: bool = False
    measured: bool = False  # its latest evaluation was measured here (not imported, not demo data)
    published: float | None = None  # a speedup someone else published for it (Kernel.published_speedup)
    published_on: str = ""  # the hardware that figure was timed on ("L40S")


@dataclass
class Tally:
    """Counts over the problems of one level under one rule (sample 0, or best-of-n)."""

    attempted: int = 0
    compiled: int = 0
    correct: int = 0  # correct kernels, with or without a speedup
    unscored: int = 0  # correct but without a speedup (no baseline)
    speedups: array = field(default_factory=lambda: array("d"))  # sorted speedups of scored problems
    log_sum: float = 0.0  # fsum of log(speedup) over `speedups`

    def finish(self, values: Iterable[float]) -> None:
        self.speedups = array("d", sorted(values))
        self.log_sum = math.fsum(map(math.log, self.speedups))

    def above(self, p: float) -> int:
        """How many scored problems have speedup strictly above p (a binary search)."""
        return len(self.speedups) - bisect.bisect_right(self.speedups, p)

    def geomean(self) -> float | None:
        return math.exp(self.log_sum / len(self.speedups)) if self.speedups else None


@dataclass
class LevelScore:
    """One run's aggregate on one level (or all levels): what the read model stores."""

    sample0: Tally = field(default_factory=Tally)
    best: Tally = field(default_factory=Tally)
    pass_at_1_sum: float = 0.0  # sum over attempted problems of pass@1 (c / n of counted samples)
    kernels: int = 0
    flagged: int = 0
    unreviewed: int = 0
    excluded: int = 0
    measured: int = 0  # kernels whose latest evaluation was measured here (measured_here reads it)
    # The published figures, apart from everything measured: per problem the best published speedup
    # of its counted kernels (the kernel a published leaderboard lists), and where they were timed.
    published: Tally = field(default_factory=Tally)
    published_on: str = ""
    # problem id -> its entry (problem_entry: sample-0 status code, sample-0 speedup, best speedup,
    # kernels, ...; status codes in STATUS_CODES): what the aggregates above are folded from.
    problems: dict[int, list[Any]] = field(default_factory=dict)

    def tally(self, rule: str) -> Tally:
        return self.best if rule == RULE_BEST else self.sample0


# Per-problem outcome (of sample 0, and of the best sample), as stored in LevelScore.problems.
STATUS_CODES = {"missing": 0, "failed": 1, "compiled": 2, "correct": 3, "unscored": 4}
_COMPILED_CODES = (2, 3, 4)
_CORRECT_CODES = (3, 4)

# A problem's entry in LevelScore.problems (and RunScore.problems): everything its run's level
# aggregates need of it, so that a level is the fold of its problems' entries (`fold`). A result
# changes one problem's entry; the stored aggregates are then folded again from the stored entries
# (leaderboard.boards), with no other kernel of the run read. Indexes:
S0_STATUS, S0_SPEEDUP, BEST_SPEEDUP, KERNELS = 0, 1, 2, 3  # the first four: what run pages read
BEST_STATUS, SAMPLES, CORRECT, PUBLISHED, PUBLISHED_ON = 4, 5, 6, 7, 8
FLAGGED, UNREVIEWED, EXCLUDED, MEASURED = 9, 10, 11, 12
ENTRY_LENGTH = 13


def _outcome(kernel: KernelFacts | None) -> tuple[bool, bool, float | None]:
    """(compiled, correct, speedup-if-scored) of one kernel; a correct kernel did compile."""
    if kernel is None:
        return False, False, None
    correct = bool(kernel.correct)
    return bool(kernel.compiled) or correct, correct, kernel.speedup if correct else None


def _status_code(present: bool, compiled: bool, correct: bool, speedup: float | None) -> int:
    if not present:
        return STATUS_CODES["missing"]
    if correct:
        return STATUS_CODES["correct"] if speedup is not None else STATUS_CODES["unscored"]
    return STATUS_CODES["compiled"] if compiled else STATUS_CODES["failed"]


def problem_entry(kernels: Sequence[KernelFacts], *, include_excluded: bool = False) -> list[Any]:
    """One problem's entry (the indexes above) from all its kernels in one run. Kernels excluded by
    a reviewer count as never submitted unless `include_excluded`, but are counted in KERNELS and
    EXCLUDED either way. Independent of the kernels' order."""
    samples = [k for k in kernels if include_excluded or not k.excluded]
    zero = next((k for k in samples if k.sample_index == 0), None)
    compiled, correct, speedup = _outcome(zero)
    outcomes = [_outcome(k) for k in samples]
    n_correct = sum(1 for _, c, _ in outcomes if c)
    best = max((s for _, c, s in outcomes if c and s is not None), default=None)
    published = max((k.published for k in samples if k.published is not None), default=None)
    # A fixed rule, as the set-based rebuild's max(): the last name in code point order.
    published_on = max((k.published_on for k in samples if k.published is not None and k.published_on), default="")
    return [
        _status_code(zero is not None, compiled, correct, speedup),
        speedup,
        best,
        len(kernels),
        _status_code(bool(samples), any(c for c, _, _ in outcomes), n_correct > 0, best),
        len(samples),
        n_correct,
        published,
        published_on,
        sum(k.flagged for k in kernels),
        sum(k.unreviewed for k in kernels),
        sum(k.excluded for k in kernels),
        sum(k.measured for k in kernels),
    ]


def _tally_of(entries: list[list[Any]], status: int, speedup: int) -> Tally:
    """One rule's counts over entries (`status`, `speedup`: the rule's indexes in an entry)."""
    codes = Counter(entry[status] for entry in entries)
    tally = Tally(
        attempted=len(entries) - codes[STATUS_CODES["missing"]],
        compiled=sum(codes[code] for code in _COMPILED_CODES),
        correct=sum(codes[code] for code in _CORRECT_CODES),
        unscored=codes[STATUS_CODES["unscored"]],
    )
    tally.finish(entry[speedup] for entry in entries if entry[status] == STATUS_CODES["correct"])
    return tally


@lru_cache(maxsize=4096)
def _pass_at_1(samples: int, correct: int) -> float:
    return pass_at_k(samples, correct, 1)


def fold(entries: dict[int, list[Any]]) -> LevelScore:
    """A level's aggregate from its problems' entries ({problem id: entry}): the same, to the bit,
    whatever order the entries come in (sorted speedups, fsums, max for the published hardware).
    All levels' is the `merge` of its levels', not a fold."""
    values = list(entries.values())
    published = [entry for entry in values if entry[PUBLISHED] is not None]
    score = LevelScore(
        sample0=_tally_of(values, S0_STATUS, S0_SPEEDUP),
        best=_tally_of(values, BEST_STATUS, BEST_SPEEDUP),
        # fsum: the same sum in whatever order the problems come (a query's row order is not fixed).
        pass_at_1_sum=math.fsum(_pass_at_1(entry[SAMPLES], entry[CORRECT]) for entry in values if entry[SAMPLES]),
        kernels=sum(entry[KERNELS] for entry in values),
        flagged=sum(entry[FLAGGED] for entry in values),
        unreviewed=sum(entry[UNREVIEWED] for entry in values),
        excluded=sum(entry[EXCLUDED] for entry in values),
        measured=sum(entry[MEASURED] for entry in values),
        published_on=max((entry[PUBLISHED_ON] for entry in published), default=""),
        problems=entries,
    )
    score.published.attempted = score.published.compiled = score.published.correct = len(published)
    score.published.finish(entry[PUBLISHED] for entry in published)
    return score


def merge(levels: Iterable[LevelScore]) -> LevelScore:
    """All levels' aggregate from its levels' (each problem is of one level), without their entries:
    counts added, speedups merged and their logs summed again, so to the bit what `fold` gives over
    every entry; pass@1's sum is the fsum of the levels' sums (which differs from the fsum of every
    problem's by an ulp at most), so that a result re-folds its own level and merges the others'
    stored aggregates, never their entries. The same in whatever order the levels come."""
    levels = list(levels)
    return LevelScore(
        sample0=_merged([level.sample0 for level in levels]),
        best=_merged([level.best for level in levels]),
        pass_at_1_sum=math.fsum(level.pass_at_1_sum for level in levels),
        kernels=sum(level.kernels for level in levels),
        flagged=sum(level.flagged for level in levels),
        unreviewed=sum(level.unreviewed for level in levels),
        excluded=sum(level.excluded for level in levels),
        measured=sum(level.measured for level in levels),
        published=_merged([level.published for level in levels]),
        published_on=max((level.published_on for level in levels), default=""),
    )


def _merged(tallies: list[Tally]) -> Tally:
    tally = Tally(
        attempted=sum(t.attempted for t in tallies),
        compiled=sum(t.compiled for t in tallies),
        correct=sum(t.correct for t in tallies),
        unscored=sum(t.unscored for t in tallies),
    )
    tally.finish(s for t in tallies for s in t.speedups)
    return tally


@dataclass(frozen=True)
class Rest:
    """What a level's entries other than the ones being replaced contribute to the two parts of its
    fold that are no sum of differences (pass@1's fsum, the published hardware's max): how many
    entries there are, the (samples, correct samples) of each that has samples, counted, and the
    last published hardware among those with a published figure."""

    entries: int
    pairs: Counter
    published_on: str


def rest_of(entries: Iterable[Sequence[Any]]) -> Rest:
    """The Rest of these entries (the reference for the database's own aggregate of them)."""
    entries = list(entries)
    pairs = Counter((entry[SAMPLES], entry[CORRECT]) for entry in entries if entry[SAMPLES])
    published_on = max((e[PUBLISHED_ON] for e in entries if e[PUBLISHED] is not None), default="")
    return Rest(len(entries), pairs, published_on)


# The level's sums of its entries' counts: LevelScore field, entry index.
_SUMS = (
    ("kernels", KERNELS),
    ("flagged", FLAGGED),
    ("unreviewed", UNREVIEWED),
    ("excluded", EXCLUDED),
    ("measured", MEASURED),
)


def patch(score: LevelScore, old: list[list[Any]], new: list[list[Any]], rest: Rest) -> LevelScore:
    """The fold of a level's entries after `old` (entries it holds) are replaced by `new`, from its
    stored fold (`score`, its entries not read) and the `rest` of its entries: counts moved by the
    difference, each speedup taken out of and put into the sorted speedups (so the same multiset,
    sorted and summed again, as `fold` gives), pass@1's fsum and the published hardware made again
    from `rest` and `new`. To the bit what `fold` gives over the new entries (without `problems`).
    Raises ValueError when a speedup of `old` is not among the stored ones (the row is not the fold
    of those entries: fold it instead)."""
    pairs = rest.pairs + Counter((entry[SAMPLES], entry[CORRECT]) for entry in new if entry[SAMPLES])
    published = [entry[PUBLISHED_ON] for entry in new if entry[PUBLISHED] is not None]
    patched = LevelScore(
        sample0=_patched_tally(score.sample0, old, new, S0_STATUS, S0_SPEEDUP),
        best=_patched_tally(score.best, old, new, BEST_STATUS, BEST_SPEEDUP),
        pass_at_1_sum=math.fsum(_pass_at_1(*pair) for pair, count in pairs.items() for _ in range(count)),
        published=_patched_published(score.published, old, new),
        published_on=max([rest.published_on, *published]),
    )
    for name, index in _SUMS:
        setattr(patched, name, getattr(score, name) + sum(e[index] for e in new) - sum(e[index] for e in old))
    return patched


def _patched_tally(tally: Tally, old: list[list[Any]], new: list[list[Any]], status: int, speedup: int) -> Tally:
    """One rule's tally with `old` entries taken out and `new` ones put in (as `_tally_of` counts)."""
    patched = Tally(tally.attempted, tally.compiled, tally.correct, tally.unscored)
    values = list(tally.speedups)
    for entries, sign in ((old, -1), (new, 1)):
        for entry in entries:
            code = entry[status]
            patched.attempted += sign * (code != STATUS_CODES["missing"])
            patched.compiled += sign * (code in _COMPILED_CODES)
            patched.correct += sign * (code in _CORRECT_CODES)
            patched.unscored += sign * (code == STATUS_CODES["unscored"])
            if code == STATUS_CODES["correct"] and sign < 0:
                values.remove(entry[speedup])
            elif code == STATUS_CODES["correct"]:
                values.append(entry[speedup])
    patched.finish(values)
    return patched


def _patched_published(tally: Tally, old: list[list[Any]], new: list[list[Any]]) -> Tally:
    values = list(tally.speedups)
    for entry in old:
        if entry[PUBLISHED] is not None:
            values.remove(entry[PUBLISHED])
    values += [entry[PUBLISHED] for entry in new if entry[PUBLISHED] is not None]
    patched = Tally(attempted=len(values), compiled=len(values), correct=len(values))
    patched.finish(values)
    return patched


def all_levels_score(kernels_by_level: dict[int, list[KernelFacts]], *, include_excluded: bool = False) -> LevelScore:
    """All levels' aggregate of one run's kernels ({level: its kernels}), as the stored all-levels
    rows hold it: the merge of each level's."""
    return merge(level_score(kernels, include_excluded=include_excluded) for kernels in kernels_by_level.values())


def level_score(kernels: Iterable[KernelFacts], *, include_excluded: bool = False) -> LevelScore:
    """The aggregate of one run's kernels of one level: the fold of its problems' entries (of all
    levels: `all_levels_score`).

    Kernels excluded by a reviewer (reward hack, invalid) are left out as if never submitted,
    unless `include_excluded`; they are counted in `excluded` either way."""
    by_problem: dict[int, list[KernelFacts]] = {}
    for kernel in kernels:
        by_problem.setdefault(kernel.problem_id, []).append(kernel)
    return fold({pid: problem_entry(samples, include_excluded=include_excluded) for pid, samples in by_problem.items()})


# ---------------------------------------------------------------------------------------------
# from the aggregate to the row's numbers


def summary(
    score: LevelScore, n_problems: int, ps: Sequence[float] = STANDARD_PS, rule: str = RULE_SAMPLE0
) -> dict[str, Any]:
    """The row's numbers under `rule` (KernelBench's sample 0 by default), plus the labelled
    best-of-n and pass@1 ones, always present whatever the rule.

    Keys (stable, also in the API and exports): rule, n_problems, attempted, compiled_rate,
    correct_rate (= fast_0), unscored, fast_<p> for each p, geomean_speedup, geomean_speedup_all;
    and best_attempted, best_compiled_rate, best_correct_rate, best_unscored, best_fast_<p>,
    best_geomean_speedup, best_geomean_speedup_all, pass_at_1."""
    result: dict[str, Any] = {"rule": rule}
    result.update(_rule_summary(score.tally(rule), n_problems, ps, ""))
    result.update(_rule_summary(score.best, n_problems, ps, "best_"))
    result["pass_at_1"] = score.pass_at_1_sum / n_problems
    return result


def published_summary(
    published: Tally, n_problems: int, ps: Sequence[float] = STANDARD_PS, rule: str = RULE_SAMPLE0
) -> dict[str, Any]:
    """`summary`'s keys from the published figures alone (a row not yet measured here). A published
    leaderboard lists one figure per problem, its best correct kernel, so best-of-n is that same
    figure, and pass@1 over samples is unknown (None)."""
    result: dict[str, Any] = {"rule": rule}
    result.update(_rule_summary(published, n_problems, ps, ""))
    result.update(_rule_summary(published, n_problems, ps, "best_"))
    result["pass_at_1"] = None
    return result


def measured_minus_published(entries: Iterable[Sequence[Any]], p: float, rule: str = RULE_SAMPLE0) -> int:
    """Over the problems with a kernel measured here: how many more pass fast_p at p by what was
    measured than by what was published (negative: fewer). Each problem is compared with itself, so
    the difference never mixes a problem measured here with one only published."""
    status, speedup = (BEST_STATUS, BEST_SPEEDUP) if rule == RULE_BEST else (S0_STATUS, S0_SPEEDUP)
    difference = 0
    for entry in entries:
        if not entry[MEASURED]:
            continue
        if p <= 0:
            measured = entry[status] in _CORRECT_CODES
        else:
            measured = entry[status] == STATUS_CODES["correct"] and entry[speedup] > p
        published = entry[PUBLISHED] is not None and (p <= 0 or entry[PUBLISHED] > p)
        difference += int(measured) - int(published)
    return difference


def _rule_summary(tally: Tally, n: int, ps: Sequence[float], prefix: str) -> dict[str, Any]:
    if n < 1:
        raise ValueError(f"n_problems must be at least 1, got {n}")
    result: dict[str, Any] = {
        "n_problems": n,
        "attempted": tally.attempted,
        "compiled_rate": tally.compiled / n,
        "correct_rate": tally.correct / n,
        "unscored": tally.unscored,
        fast_p_key(0.0): tally.correct / n,
    }
    for p in ps:
        result[fast_p_key(p)] = fast_p(tally, n, p)
    result["geomean_speedup"] = tally.geomean()
    result["geomean_speedup_all"] = math.exp(tally.log_sum / n)
    if not prefix:
        return result
    return {prefix + key: value for key, value in result.items() if key != "n_problems"}


def fast_p(tally: Tally, n_problems: int, p: float) -> float:
    """fast_p of a tally: p = 0 is the correctness rate (unscored kernels count); any p > 0 is a
    binary search in the sorted speedups."""
    if p <= 0:
        return tally.correct / n_problems
    return tally.above(p) / n_problems


def fast_p_count(tally: Tally, p: float) -> int:
    return tally.correct if p <= 0 else tally.above(p)


# ---------------------------------------------------------------------------------------------
# uncertainty


@lru_cache(maxsize=16384)
def fast_p_interval(count: int, n_problems: int) -> tuple[float, float]:
    """95% percentile-bootstrap interval over problems of a fast_p of count / n_problems.

    Exactly `evaluation.results.metrics.bootstrap_interval([1] * count + [0] * (n - count), mean,
    INTERVAL_RESAMPLES)` (a test holds them equal), computed without resampling each time:
    resampling problems only sees whether each passes at p, so with the passing ones first a
    resample's draw `floor(u * n)` passes exactly when `u * n < count`. The draws u of seed 0
    depend on n alone; sorted once per n, each count costs a binary search per resample."""
    if n_problems < 1:
        return 0.0, 0.0
    stats = sorted(bisect.bisect_left(draws, count) / n_problems for draws in _scaled_draws(n_problems))
    return _quantile(stats, 0.025), _quantile(stats, 0.975)


@lru_cache(maxsize=32)
def _scaled_draws(n: int) -> tuple[array, ...]:
    """For each bootstrap resample of n problems: the n values u * n it draws, sorted (the same
    random stream as bootstrap_interval's `random.Random(0).choices`)."""
    rng = random.Random(0)
    scale = n + 0.0
    return tuple(array("d", sorted(rng.random() * scale for _ in range(n))) for _ in range(INTERVAL_RESAMPLES))


def _quantile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation between order statistics, as bootstrap_interval's quantiles."""
    position = q * (len(sorted_values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def mark_ties(intervals: Sequence[tuple[float, float]]) -> list[bool]:
    """For rows in rank order: True where a row's interval overlaps the row above it (tied)."""
    return [index > 0 and _overlap(intervals[index - 1], interval) for index, interval in enumerate(intervals)]


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]
