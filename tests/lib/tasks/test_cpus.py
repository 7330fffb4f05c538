"""``workers: auto``: the cores this process may use (affinity, cgroup quota, the machine), and numbers."""
from __future__ import annotations

import os

import numpy as np
import pytest
import yaml

from helpers import ROOT
from tasks.cpus import workers_line
from tmdlib import InputError
from tmdlib._runtime import Cores, cgroup_quota, resolve_workers, usable_cores


def _tree(tmp_path, cgroup: str, files: dict) -> str:
    """A fake root: ``proc/self/cgroup`` and files under ``sys/fs/cgroup``."""
    (tmp_path / "proc" / "self").mkdir(parents=True)
    (tmp_path / "proc" / "self" / "cgroup").write_text(cgroup)
    for rel, text in files.items():
        path = tmp_path / "sys" / "fs" / "cgroup" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return str(tmp_path)


@pytest.fixture
def machine(monkeypatch):
    """Pretend the machine has ``cpu_count`` cores and this process may run on ``affinity`` of them."""
    def set_(cpu_count: int, affinity: int):
        monkeypatch.setattr(os, "cpu_count", lambda: cpu_count)
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(affinity)), raising=False)
    return set_


# ------------------------------------------------------------------------------------------- the quota
def test_v2_no_quota(tmp_path):
    root = _tree(tmp_path, "0::/\n", {"cpu.max": "max 100000\n"})
    assert cgroup_quota(root) == (None, None)


def test_v2_quota_in_cores(tmp_path):
    root = _tree(tmp_path, "0::/\n", {"cpu.max": "200000 100000\n"})
    quota, source = cgroup_quota(root)
    assert quota == 2.0 and source.endswith(os.path.join("sys", "fs", "cgroup", "cpu.max"))


def test_v2_strictest_on_the_path_up(tmp_path):
    """A nested cgroup's own limit and its parent's: the smaller governs."""
    root = _tree(tmp_path, "0::/kubepods/pod1\n", {
        "cpu.max": "max 100000", "kubepods/cpu.max": "150000 100000", "kubepods/pod1/cpu.max": "400000 100000"})
    quota, source = cgroup_quota(root)
    assert quota == 1.5 and source.endswith(os.path.join("kubepods", "cpu.max"))


def test_v2_host_path_not_mounted_falls_back_to_the_mount_root(tmp_path):
    """No cgroup namespace: /proc/self/cgroup names the host's path; the container's cgroup is the mount root."""
    root = _tree(tmp_path, "0::/docker/abc123\n", {"cpu.max": "300000 100000"})
    assert cgroup_quota(root)[0] == 3.0


def test_v1_quota(tmp_path):
    root = _tree(tmp_path, "2:cpu,cpuacct:/\n1:memory:/x\n", {
        "cpu,cpuacct/cpu.cfs_quota_us": "50000\n", "cpu,cpuacct/cpu.cfs_period_us": "100000\n"})
    quota, source = cgroup_quota(root)
    assert quota == 0.5 and source.endswith("cpu.cfs_quota_us")


def test_v1_no_quota_is_minus_one(tmp_path):
    root = _tree(tmp_path, "1:cpu:/\n", {"cpu/cpu.cfs_quota_us": "-1", "cpu/cpu.cfs_period_us": "100000"})
    assert cgroup_quota(root) == (None, None)


def test_v1_nested(tmp_path):
    root = _tree(tmp_path, "3:cpu:/batch/job\n", {
        "cpu/cpu.cfs_quota_us": "-1", "cpu/cpu.cfs_period_us": "100000",
        "cpu/batch/job/cpu.cfs_quota_us": "300000", "cpu/batch/job/cpu.cfs_period_us": "100000"})
    assert cgroup_quota(root)[0] == 3.0


def test_no_cgroup_files_or_garbage_is_no_quota(tmp_path):
    assert cgroup_quota(tmp_path) == (None, None)  # nothing at all (not Linux, /sys not mounted)
    root = _tree(tmp_path, "0::/\n", {"cpu.max": "lots of cpu\n"})
    assert cgroup_quota(root) == (None, None)


# ------------------------------------------------------------------------------------------- auto
def test_auto_is_the_affinity_without_a_quota(tmp_path, machine):
    machine(8, 3)
    root = _tree(tmp_path, "0::/\n", {"cpu.max": "max 100000"})
    cores = usable_cores(root)
    assert (cores.count, cores.affinity, cores.machine, cores.quota) == (3, 3, 8, None)
    assert resolve_workers("auto", cores=cores) == 3


def test_auto_is_capped_by_the_quota_rounded_up(tmp_path, machine):
    machine(64, 64)
    assert usable_cores(_tree(tmp_path / "a", "0::/\n", {"cpu.max": "150000 100000"})).count == 2
    assert usable_cores(_tree(tmp_path / "b", "0::/\n", {"cpu.max": "200000 100000"})).count == 2
    assert usable_cores(_tree(tmp_path / "c", "0::/\n", {"cpu.max": "10000 100000"})).count == 1  # floor at 1


def test_auto_never_more_than_the_machine(tmp_path, machine):
    """A quota above the machine (a generous limit) or an affinity that claims more: the machine's count."""
    machine(4, 16)
    cores = usable_cores(_tree(tmp_path, "0::/\n", {"cpu.max": "3200000 100000"}))
    assert cores.count == 4


def test_auto_on_this_machine_is_within_what_it_has():
    cores = usable_cores()
    assert 1 <= cores.count <= (os.cpu_count() or 1)
    if hasattr(os, "sched_getaffinity"):
        assert cores.count <= len(os.sched_getaffinity(0))
    assert resolve_workers("auto") == cores.count == resolve_workers(None)


def test_auto_per_worker_divides_the_cores(tmp_path, machine):
    machine(8, 8)
    cores = usable_cores(_tree(tmp_path, "0::/\n", {"cpu.max": "max 100000"}))
    assert resolve_workers("auto", cores=cores, per_worker=3) == 2
    assert resolve_workers("auto", cores=cores, per_worker=16) == 1


# ------------------------------------------------------------------------------------------- numbers
@pytest.mark.parametrize("value, expected", [(1, 1), (7, 7), ("5", 5), (" 12 ", 12), ("AUTO", None),
                                             (np.int64(3), 3)])
def test_a_number_overrides(value, expected):
    cores = Cores(count=2, machine=2, affinity=2, quota=None)
    assert resolve_workers(value, cores=cores) == (expected or 2)


def test_a_number_above_the_cores_is_kept():
    """An explicit number is the user's choice (oversubscribing on purpose is allowed)."""
    assert resolve_workers(32, cores=Cores(count=2, machine=2, affinity=2, quota=None)) == 32


@pytest.mark.parametrize("value", [0, -1, "0", "-2", "1.5", 2.0, "two", "", True, [2]])
def test_bad_values_refused_with_one_clear_error(value):
    with pytest.raises(InputError) as err:
        resolve_workers(value, option="ingest.workers")
    text = str(err.value)
    assert text.startswith("ingest.workers must be auto") and repr(value) in text and "\n" not in text


# ------------------------------------------------------------------------------------------- the printed line
def test_workers_line_auto_and_given():
    cores = Cores(count=2, machine=2, affinity=2, quota=None)
    assert workers_line("auto", cores=cores) == (2, "workers: 2 (auto: affinity 2, cgroup quota none)")
    n, line = workers_line("4", cores=cores)
    assert n == 4 and line == "workers: 4 (given; auto: 2 = affinity 2, cgroup quota none)"


def test_workers_line_names_a_quota_and_a_narrow_affinity():
    cores = Cores(count=2, machine=64, affinity=8, quota=1.5)
    n, line = workers_line(None, cores=cores, per_worker=1)
    assert n == 2 and line == "workers: 2 (auto: affinity 8, cgroup quota 1.5 cores, of 64 cores)"
    n, line = workers_line("auto", cores=Cores(8, 8, 8, None), per_worker=2)
    assert n == 4 and line == "workers: 4 (auto: affinity 8, cgroup quota none, 2 cores per worker)"


def test_params_yaml_workers_are_auto_and_resolve():
    """dvc.yaml passes ``ingest.workers`` and ``tmd.workers`` to ``--workers`` as they are."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    for group in ("ingest", "tmd"):
        assert params[group]["workers"] == "auto"
        assert resolve_workers(params[group]["workers"], option=f"{group}.workers") == usable_cores().count
    dvc = (ROOT / "dvc.yaml").read_text()
    assert "--workers ${ingest.workers}" in dvc and "--workers ${tmd.workers}" in dvc
