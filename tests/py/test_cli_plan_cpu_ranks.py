# SPDX-License-Identifier: Apache-2.0
"""`plan` and `doctor` on ranks without a GPU: priced at the latency the backend gives Gloo's
steps between hosts, on the flat or hierarchical side the backend's size rule takes."""

from __future__ import annotations

import json

import pytest
from planner_support import in_ranges, played_cpu_ranks

from torch_topo import _C
from torch_topo.cli import main


def _backend_view(path):
    """(cluster, config, thresholds of a group, Gloo-side planner) of the file as the backend
    holds it: its Cluster (configured bandwidth the pinned one, as the exchange assembles it),
    the environment's config, the backend's `hierarchical_thresholds` of a group by its ranks
    and the planner that prices CPU tensors."""
    from torch_topo.cluster import Cluster
    from torch_topo.config import TopoConfig
    from torch_topo.hierarchy import HostLayout, _planner, hierarchical_thresholds

    config = TopoConfig.from_env()
    cluster = Cluster(_C.load_cluster_file(str(path)), 0, config.inter_host_gbps or 0.0)

    def thresholds(group):
        layout = HostLayout.from_hostnames([cluster.hostnames[cluster.host_of(r)] for r in group])
        return hierarchical_thresholds(layout, config, cluster=cluster)

    return cluster, config, thresholds, _planner(cluster, config, "cpu")


def _backend_side(path, op: str, nbytes: int, groups) -> dict:
    """The Gloo-side planner's estimate of `groups` run at once, on the side the backend's size
    rule takes for each of them at `nbytes` (the same side for all of them here)."""
    _, _, thresholds, model = _backend_view(path)
    (side,) = {in_ranges(thresholds(g).get(op, ()), nbytes) for g in groups}
    both = model.compare_hierarchical(op, nbytes, groups)
    assert both["hierarchical"]["applicable"]
    return both["hierarchical" if side else "flat"]


def _backend_lines(path, op: str, group) -> list[str]:
    """TORCH_TOPO_DEBUG's predicted times of the group (the backend's size rule), each size with
    the side the rule's thresholds take."""
    from torch_topo.hierarchical_choice import CHOICE_SIZES
    from torch_topo.hierarchy import HostLayout, _rule_model

    cluster, config, thresholds, _ = _backend_view(path)
    layout = HostLayout.from_hostnames([cluster.hostnames[cluster.host_of(r)] for r in group])
    rule, cut = _rule_model(layout, config, cluster), thresholds(group)
    cells = []
    for nbytes, size in zip(CHOICE_SIZES, ("64 KiB", "1 MiB", "16 MiB", "256 MiB", "1 GiB"),
                            strict=True):
        both = rule.compare_hierarchical(op, nbytes, None)
        side = "hierarchical" if in_ranges(cut.get(op, ()), nbytes) else "flat"
        cells.append(f"{size}: flat ring {both['flat']['seconds'] * 1e6:.1f} us, hierarchical "
                     f"{both['hierarchical']['seconds'] * 1e6:.1f} us -> {side}")
    return [f"{op} " + "; ".join(cells)]


def _predicted_lines(text: str) -> list[str]:
    return [x.removeprefix("     predicted ") for x in text.splitlines()
            if x.startswith("     predicted ")]


def _plan_shows_the_backends_side(path, capsys, everyone, sizes: dict[str, int]) -> None:
    """`plan --json` of a dp=8 mesh at 1e8 bytes per step: its all_reduce algorithm at each of
    `sizes` ({label: bytes}) and its step cost are the backend's side; `plan`'s predicted lines
    are TORCH_TOPO_DEBUG's."""
    assert main(["plan", str(path), "--mesh", "dp=8", "--traffic", "dp=1e8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for label, nbytes in sizes.items():
        taken = _backend_side(path, "all_reduce", nbytes, everyone)
        assert out["algorithms"]["dp"][label] == taken["algorithm"], label
    step = _backend_side(path, "all_reduce", 10**8, everyone)
    assert out["cost"]["dp"] == pytest.approx(step["seconds"], rel=1e-12)
    assert main(["plan", str(path), "--mesh", "dp=8"]) == 0
    assert _predicted_lines(capsys.readouterr().out) == _backend_lines(path, "all_reduce",
                                                                        everyone[0])


def _tp_crossing_message(path, capsys) -> str:
    """doctor's tp-crosses-hosts finding on a tp=4,dp=2 mesh of the file."""
    assert main(["doctor", str(path), "--mesh", "tp=4,dp=2", "--json"]) == 1
    (found,) = [f for f in json.loads(capsys.readouterr().out)["findings"]
                if f["code"] == "tp-crosses-hosts"]
    return found["message"]


def test_inter_host_latency_reaches_file_plans_and_doctor(tmp_path, capsys, monkeypatch):
    # TORCH_TOPO_INTER_HOST_LATENCY_US wins over the file's own latency, as the backend's
    # exchange pins it; unset, the CPU ranks' Gloo steps take the file's latency but at least
    # 50 us (checked against the backend below). Reference: the cost model on documents that
    # carry each latency.
    from torch_topo.plan import Plan

    monkeypatch.delenv("TORCH_TOPO_INTER_HOST_LATENCY_US", raising=False)
    doc, path = played_cpu_ranks(tmp_path, 3.0)
    model = {us: _C.PlannerCluster(json.dumps({**doc, "inter_host_latency_us": us}), 4 << 20,
                                   "auto", 0) for us in (50.0, 1e5)}
    everyone = [list(range(8))]
    step = {us: m.estimate("all_reduce", 10**8, everyone) for us, m in model.items()}
    assert step[1e5]["algorithm"] != step[50.0]["algorithm"]  # the latency changes the pick
    naive = {us: Plan.naive({**doc, "inter_host_latency_us": us}, {"tp": 4, "dp": 2}).cost("tp")
             for us in (50.0, 1e5)}
    assert f"{naive[1e5] * 1e3:.2f}" != f"{naive[50.0] * 1e3:.2f}"

    for env, us in ((None, 50.0), ("1e5", 1e5)):
        if env is not None:
            monkeypatch.setenv("TORCH_TOPO_INTER_HOST_LATENCY_US", env)
        assert main(["plan", str(path), "--mesh", "dp=8", "--traffic", "dp=1e8", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        # On the side the backend's size rule takes (checked in the tests below).
        taken = _backend_side(path, "all_reduce", 10**8, everyone)
        side = "hierarchical" if taken["algorithm"] == "hierarchical" else "flat"
        assert taken["seconds"] == pytest.approx(model[us].compare_hierarchical(
            "all_reduce", 10**8, everyone)[side]["seconds"], rel=1e-12)
        assert out["algorithms"]["dp"]["step"] == taken["algorithm"]
        assert out["cost"]["dp"] == pytest.approx(taken["seconds"], rel=1e-12)
        assert main(["doctor", str(path), "--mesh", "tp=4,dp=2", "--json"]) == 1
        (found,) = [f for f in json.loads(capsys.readouterr().out)["findings"]
                    if f["code"] == "tp-crosses-hosts"]
        tp_naive = Plan.naive({**doc, "inter_host_latency_us": us}, {"tp": 4, "dp": 2})
        tp = _backend_side(path, "all_reduce", int(tp_naive.dim_info("tp")["bytes"]),
                           tp_naive.groups("tp"))
        assert f"(predicted {tp['seconds'] * 1e3:.2f} -> " in found["message"]


@pytest.mark.parametrize("env", [None, "20", "3"])
def test_cpu_ranks_are_priced_at_the_latency_the_backend_gives_gloo(env, tmp_path, capsys,
                                                                  monkeypatch):
    # The file's ranks have no GPU, so Gloo carries their groups, whose steps between hosts the
    # backend prices at TORCH_TOPO_INTER_HOST_LATENCY_US where set, else the cluster's latency
    # but at least 50 us (TCP, not NCCL's hop); plan and doctor priced them at the file's 3 us.
    # Reference: the backend's own Gloo-side planner over the same file read as the backend's
    # Cluster, with the same config, on the side its size rule takes; plan's and doctor's
    # numbers must be its numbers.
    from torch_topo.cluster import Cluster
    from torch_topo.config import TopoConfig
    from torch_topo.hierarchical_choice import predicted_choices
    from torch_topo.hierarchy import _planner, gloo_latency_us
    from torch_topo.plan import Plan

    monkeypatch.delenv("TORCH_TOPO_INTER_HOST_LATENCY_US", raising=False)
    if env is not None:
        monkeypatch.setenv("TORCH_TOPO_INTER_HOST_LATENCY_US", env)
    _, path = played_cpu_ranks(tmp_path, 3.0)
    config = TopoConfig.from_env()
    cluster = Cluster(_C.load_cluster_file(str(path)), 0)
    assert gloo_latency_us(cluster, config) == (50.0 if env is None else float(env))
    backend = _planner(cluster, config, "cpu")
    everyone = [list(range(8))]
    lines = predicted_choices(backend, everyone, ops=("all_reduce",))
    # What a plan at the file's own 3 us said: the test tells the two apart when they differ.
    at_file = _C.PlannerCluster(path.read_text(), 4 << 20, "auto", 0)
    differs = lines != predicted_choices(at_file, everyone, ops=("all_reduce",))
    assert differs == (env != "3")

    _plan_shows_the_backends_side(path, capsys, everyone, {"step": 10**8})
    message = _tp_crossing_message(path, capsys)
    naive = Plan.naive(backend, {"tp": 4, "dp": 2})
    planned = Plan.build(backend, {"tp": 4, "dp": 2})  # its tp groups stay inside hosts
    assert all(len({r // 4 for r in g}) == 1 for g in planned.groups("tp"))
    tp = _backend_side(path, "all_reduce", int(naive.dim_info("tp")["bytes"]), naive.groups("tp"))
    assert (f"(predicted {tp['seconds'] * 1e3:.2f} -> {planned.cost('tp') * 1e3:.2f} "
            "ms/step)") in message


@pytest.mark.parametrize("gbps", [None, "12.5"])
def test_cpu_ranks_take_the_side_the_backends_size_rule_takes(gbps, tmp_path, capsys,
                                                               monkeypatch):
    # Where a rank has no GPU the backend decides flat or hierarchical by its size rule, not by
    # the cost model plan printed: on this file the model goes hierarchical for all_reduce from
    # 16 MiB, the rule at every size (bandwidth unknown: 10 GbE) or below some size only
    # (12.5 GB/s: the slow steps saved count on small messages only).
    # Reference: the backend's hierarchical_thresholds over the file read as its Cluster with
    # the same config; the sides' prices are its Gloo-side planner's.
    from torch_topo.hierarchy import HIERARCHICAL_OPS
    from torch_topo.plan import SIZE_CLASSES

    monkeypatch.delenv("TORCH_TOPO_INTER_HOST_LATENCY_US", raising=False)
    monkeypatch.delenv("TORCH_TOPO_INTER_HOST_GBPS", raising=False)
    if gbps is not None:
        monkeypatch.setenv("TORCH_TOPO_INTER_HOST_GBPS", gbps)
    _, path = played_cpu_ranks(tmp_path, 3.0)
    _, _, thresholds, model = _backend_view(path)
    everyone = [list(range(8))]
    rule = thresholds(everyone[0])
    if gbps is None:
        assert rule == dict.fromkeys(HIERARCHICAL_OPS, ((0, None),))
    else:
        assert set(rule) == set(HIERARCHICAL_OPS)
        assert all(len(r) == 1 and r[0][0] == 0 and r[0][1] is not None for r in rule.values())
    assert model.hierarchical_thresholds(everyone[0])["all_reduce"] == [(16 << 20, None)]

    _plan_shows_the_backends_side(path, capsys, everyone, {"step": 10**8, **SIZE_CLASSES})
    # doctor's contiguous tp groups span both hosts, 1 GiB per step: the rule's side again.
    tp = _backend_side(path, "all_reduce", 1 << 30, [[0, 2, 4, 6], [1, 3, 5, 7]])
    assert f"(predicted {tp['seconds'] * 1e3:.2f} -> " in _tp_crossing_message(path, capsys)


def test_doctor_follows_hierarchical_never_as_plan_does(tmp_path, capsys, monkeypatch):
    # TORCH_TOPO_HIERARCHICAL=never keeps every group of the backend flat; plan followed it, but
    # doctor built its config from its network arguments alone and priced the CPU ranks' groups
    # on the size rule's hierarchical side. Reference: the backend's Gloo-side planner on the
    # side its thresholds take under that config (none: flat).
    monkeypatch.delenv("TORCH_TOPO_INTER_HOST_LATENCY_US", raising=False)
    monkeypatch.delenv("TORCH_TOPO_INTER_HOST_GBPS", raising=False)
    monkeypatch.setenv("TORCH_TOPO_HIERARCHICAL", "never")
    _, path = played_cpu_ranks(tmp_path, 3.0)
    tp_groups = [[0, 2, 4, 6], [1, 3, 5, 7]]
    _, _, thresholds, _ = _backend_view(path)
    assert thresholds(tp_groups[0]) == {}
    assert main(["doctor", str(path), "--mesh", "tp=4,dp=2", "--json"]) == 1
    (found,) = [f for f in json.loads(capsys.readouterr().out)["findings"]
                if f["code"] == "tp-crosses-hosts"]
    tp = _backend_side(path, "all_reduce", 1 << 30, tp_groups)
    assert tp["algorithm"] != "hierarchical"
    assert f"(predicted {tp['seconds'] * 1e3:.2f} -> " in found["message"], found["message"]
