"""The host's watch on a worker, driven directly: it kills (through its callback) and says why."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from scrollctx.kernel._quota import WorkerWatch, cpu_seconds, written_bytes


def _watch(tmp_path: Path, **options: float) -> tuple[WorkerWatch, threading.Event]:
    killed = threading.Event()
    settings = {"quota": 2**62, "floor": 2**62, "idle_cpu": 1e9, **options}
    watch = WorkerWatch(
        os.getpid(),
        tmp_path,
        quota=int(settings["quota"]),
        floor=int(settings["floor"]),
        idle_cpu=settings["idle_cpu"],
        kill=killed.set,
    )
    return watch, killed


def test_a_disk_under_the_floor_gets_the_worker_killed(tmp_path: Path) -> None:
    watch, killed = _watch(tmp_path)
    try:
        assert watch.floor <= os.statvfs(tmp_path).f_bavail * os.statvfs(tmp_path).f_frsize
        assert watch.check() is None
        watch.floor = 2**62  # as if the disk had filled up since the worker started
        assert killed.wait(30)
        assert watch.reason is not None and "under the" in watch.reason
    finally:
        watch.stop()


def test_the_proc_readers_see_this_process() -> None:
    burn = sum(i * i for i in range(200_000))
    assert burn > 0
    used = cpu_seconds(os.getpid())
    assert used is not None and used > 0
    assert cpu_seconds(2**22 + 7) is None  # no such process
    written = written_bytes(os.getpid())
    assert written is None or written >= 0
