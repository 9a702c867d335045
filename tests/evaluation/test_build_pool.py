"""Sizing the build pool (``evaluation.builds.pool``): the cores builds get (never a timing core nor
its SMT sibling), what a build's process tree used (its reaped children included), and how many
builds the measured use lets run at once."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

from evaluation.builds.pool import (
    PRIOR_CORES_PER_BUILD,
    BuildUsage,
    PoolSizer,
    build_cpus,
    parse_cpu_list,
    place,
    pool_size,
    thread_siblings,
    tree_cpu_seconds,
)


def _fake_sys(tmp_path, siblings: dict[int, str]) -> str:
    for cpu, text in siblings.items():
        d = tmp_path / f"devices/system/cpu/cpu{cpu}/topology"
        d.mkdir(parents=True)
        (d / "thread_siblings_list").write_text(text + "\n")
    return str(tmp_path)


def test_cpu_lists_parse():
    assert parse_cpu_list("0-3,8,10-11") == {0, 1, 2, 3, 8, 10, 11}
    assert parse_cpu_list("5\n") == {5}


def test_builds_keep_off_the_timing_core_and_its_smt_sibling(tmp_path):
    # 8 logical CPUs, 4 physical cores: cpu N and N+4 share one (the usual Linux numbering).
    root = _fake_sys(tmp_path, {n: f"{n % 4},{n % 4 + 4}" for n in range(8)})
    assert thread_siblings(0, root) == {0, 4}
    assert build_cpus(range(8), {0}, root) == [1, 2, 3, 5, 6, 7]
    assert build_cpus(range(8), {0, 1}, root) == [2, 3, 6, 7]
    # Adjacent numbering (cpu 2k and 2k+1 share a core), as some hypervisors show it.
    root2 = _fake_sys(tmp_path / "b", {n: f"{n - n % 2}-{n - n % 2 + 1}" for n in range(8)})
    assert build_cpus(range(8), {0}, root2) == [2, 3, 4, 5, 6, 7]
    # No topology file: only the core itself is kept free.
    assert build_cpus(range(4), {3}, str(tmp_path / "none")) == [0, 1, 2]


def _smt16(tmp_path, adjacent: bool = False) -> str:
    """16 logical CPUs on 8 physical cores: cpu N and N+8 share one, or (adjacent) 2k and 2k+1."""
    if adjacent:
        return _fake_sys(tmp_path, {n: f"{n - n % 2}-{n - n % 2 + 1}" for n in range(16)})
    return _fake_sys(tmp_path, {n: f"{n % 8},{n % 8 + 8}" for n in range(16)})


def test_one_gpu_times_on_one_core_and_builds_get_the_other_physical_cores(tmp_path):
    cores = place(range(16), 1, _smt16(tmp_path))
    assert cores.timing == [0]
    assert cores.builds == cores.slices[0] == [c for c in range(16) if c not in (0, 8)]


def test_two_gpus_time_on_two_physical_cores_never_siblings(tmp_path):
    # Splitting the logical CPUs in halves would give 0 and 8: one physical core for both GPUs.
    cores = place(range(16), 2, _smt16(tmp_path))
    assert cores.timing == [0, 4]
    assert cores.builds == [1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15]
    assert cores.slices == [[1, 2, 3, 9, 10, 11], [5, 6, 7, 13, 14, 15]]
    adjacent = place(range(16), 2, _smt16(tmp_path / "adj", adjacent=True))
    assert adjacent.timing == [0, 8]
    assert adjacent.builds == [2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15]


def test_the_builder_never_gets_a_timing_core_or_its_sibling(tmp_path):
    for adjacent in (False, True):
        root = _smt16(tmp_path / str(adjacent), adjacent)
        for gpus in (1, 2, 3, 4):
            for chosen in (None, [2, 6, 11, 13][:gpus]):
                cores = place(range(16), gpus, root, timing=chosen)
                kept_off = set().union(*(thread_siblings(c, root) for c in cores.timing))
                assert len(cores.timing) == gpus and cores.builds
                assert not kept_off & (set(cores.builds) | set().union(*map(set, cores.slices)))


def test_the_operators_timing_cores_win_and_too_few_cpus_pin_nothing(tmp_path):
    root = _smt16(tmp_path)
    assert place(range(16), 2, root, timing=[3, 6]).builds == [0, 1, 2, 4, 5, 7, 8, 9, 10, 12, 13, 15]
    few = place(range(4), 2, root)
    assert (few.timing, few.slices, few.builds) == ([], [[], []], [0, 1, 2, 3])


def test_one_builder_of_several_gets_its_part_of_the_cores_and_memory():
    whole, half = PoolSizer(12, memory_mb=40_000), PoolSizer(12, memory_mb=40_000, share=2)
    assert (half.cores, half.memory_mb) == (6, 20_000)
    assert half.limit == whole.limit // 2 == 4


def test_this_hosts_topology_is_read():
    cpus = sorted(os.sched_getaffinity(0))
    kept = build_cpus(cpus, {cpus[0]})
    assert cpus[0] not in kept
    assert not thread_siblings(cpus[0]) & set(kept)


def test_a_build_process_tree_counts_the_children_it_reaped():
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass\n"
    parent = (
        "import subprocess, sys, time\n"
        f"subprocess.run([sys.executable, '-c', {burn!r}])\n"
        "print('reaped', flush=True)\n"
        "time.sleep(30)\n"
    )
    p = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "reaped"
        assert tree_cpu_seconds([p.pid]) >= 0.5  # the child's 0.6 s, in the parent's cutime
    finally:
        p.kill()
        p.wait()


def test_the_pool_size_follows_the_measured_cores_and_memory():
    assert pool_size(14, 0, 2.0, 2000) == 7  # memory unknown: the cores decide
    assert pool_size(14, 64_000, 1.0, 2000) == 14
    assert pool_size(14, 10_000, 1.0, 2000) == 4  # 80 % of 10 GB holds four 2 GB builds
    assert pool_size(2, 100, 2.0, 8000) == 1  # at least one


def test_the_sizer_starts_from_priors_then_follows_the_builds():
    sizer = PoolSizer(cores=14, memory_mb=200_000)
    assert sizer.limit == pool_size(14, 200_000, PRIOR_CORES_PER_BUILD, 2500)
    for _ in range(5):  # builds that kept 2 cores busy (two compiles side by side), 1.5 GB
        sizer.record(BuildUsage(cpu_s=120.0, peak_rss_mb=1500.0, wall_s=60.0))
    assert sizer.limit == 7
    for _ in range(20):  # then builds of one core (a precompiled header cut the wrapper's compile)
        sizer.record(BuildUsage(cpu_s=30.0, peak_rss_mb=1500.0, wall_s=30.0))
    assert sizer.limit == 14
    small = PoolSizer(cores=14, memory_mb=6000)
    small.record(BuildUsage(cpu_s=30.0, peak_rss_mb=2400.0, wall_s=30.0))
    assert small.limit == 2  # memory-bound
    assert PoolSizer(cores=14, workers=3).limit == 3  # a fixed number wins


def test_the_sizer_admits_at_most_its_limit():
    sizer = PoolSizer(cores=3, workers=2)
    running, peak, lock = [0], [0], threading.Lock()

    def job() -> None:
        sizer.acquire()
        try:
            with lock:
                running[0] += 1
                peak[0] = max(peak[0], running[0])
            time.sleep(0.05)
            with lock:
                running[0] -= 1
        finally:
            sizer.release()

    threads = [threading.Thread(target=job) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak[0] == 2 and sizer.running == 0


def test_builds_run_behind_the_gpu_workers_processes(tmp_path, monkeypatch):
    """The pool's threads (and so every build process they start) run at a lower priority: a pool
    that fills the cores must not slow the start of the next evaluation's processes."""
    import os

    from evaluation.builds.stage import BUILD_NICE, BuildPool
    from evaluation.results.types import EvaluationConfig

    monkeypatch.delenv("KB_BUILD_NICE", raising=False)
    mine = os.getpriority(os.PRIO_PROCESS, 0)
    with BuildPool(1, EvaluationConfig(build_cache_dir=str(tmp_path))) as pool:
        nice = pool._pool.submit(os.getpriority, os.PRIO_PROCESS, 0).result()
    assert nice == max(mine, BUILD_NICE)
    assert os.getpriority(os.PRIO_PROCESS, 0) == mine  # the caller's own thread is left as it was
