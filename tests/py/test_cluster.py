# SPDX-License-Identifier: Apache-2.0
"""exchange_cluster: ranks in separate processes over a FileStore play hosts and GPUs of real
topology files; disagreement, timeouts and bad play specs get clear errors."""

import json
import socket
import time
from pathlib import Path

import pytest
import torch.distributed as dist
from rank_processes import start_processes

from torch_topo import TopoConfig
from torch_topo.cluster import exchange_cluster, parse_play
from torch_topo.mesh import played_placements

DATA = Path(__file__).resolve().parents[1] / "data"
P4D = str(DATA / "nccl_topo_xml" / "aws_p4d.24xlarge_8xA100_topo.xml")
DGX2 = str(DATA / "hwloc" / "hwloc_nvidia_DGX-2H_16xV100_12xNVSwitch.xml")


def _rank_main(rank, world, store_path, configs, out_dir):
    store = dist.FileStore(store_path, world)
    try:
        cluster = exchange_cluster(store, rank, world, TopoConfig(**configs[rank]))
        result = {
            "hosts": cluster.hostnames,
            "gpus": [h.gpu_count for h in cluster.hosts],
            "placements": [[p.host, p.local_gpu, p.local_rank] for p in cluster.placements],
            "bandwidth": cluster.inter_host_bandwidth_gbps,
            "local_bus": cluster.local.native.gpus[cluster.placements[rank].local_gpu].bus_id,
        }
    except Exception as exc:  # reported to the parent, which asserts on it
        result = {"error": type(exc).__name__, "message": str(exc)}
    Path(out_dir, f"{rank}.json").write_text(json.dumps(result))


def _run(tmp_path, configs):
    world = len(configs)
    start_processes(
        _rank_main,
        args=(world, str(tmp_path / "store"), configs, str(tmp_path)),
        nprocs=world,
    )
    return [json.loads((tmp_path / f"{r}.json").read_text()) for r in range(world)]


@pytest.mark.timeout(180)
def test_four_processes_play_two_hosts_of_two_gpus(tmp_path):
    play = "hostA:0,hostA:1,hostB:0,hostB:1"
    cfg = {"topology_file": P4D, "play": play, "timeout_s": 60.0, "inter_host_gbps": 12.5}
    results = _run(tmp_path, [cfg] * 4)
    assert "error" not in results[0], results[0]
    common = [{k: v for k, v in r.items() if k != "local_bus"} for r in results]
    assert all(c == common[0] for c in common)  # every rank built the same cluster
    assert results[0]["hosts"] == ["hostA", "hostB"]
    assert results[0]["gpus"] == [8, 8]
    assert results[0]["placements"] == [[0, 0, 0], [0, 1, 1], [1, 0, 0], [1, 1, 1]]
    assert results[0]["bandwidth"] == 12.5  # pinned wins (p4d's file gives no NIC speed)
    # GPU 0 and 1 of the p4d file are 0000:10:1c.0 and 0000:10:1d.0.
    assert [r["local_bus"] for r in results] == ["0000:10:1c.0", "0000:10:1d.0"] * 2


@pytest.mark.timeout(180)
def test_ranks_of_one_host_with_different_graphs_fail_on_every_rank(tmp_path):
    configs = [
        {"topology_file": P4D, "play": "hostA:0", "timeout_s": 60.0},
        {"topology_file": DGX2, "play": "hostA:1", "timeout_s": 60.0},
    ]
    for result in _run(tmp_path, configs):
        assert result.get("error") == "TopoMismatchError", result
        assert "ranks 0 and 1 on host 'hostA' disagree on the host topology" in result["message"]


def _layout_main(rank, world, store_path, plays, out_dir):
    from torch_topo.hierarchy import discover_layout

    store = dist.FileStore(store_path, world)
    began = time.monotonic()
    try:
        layout, _ = discover_layout(store, rank, world, rank, TopoConfig(play=plays[rank],
                                                                         timeout_s=600.0))
        result = {"hosts": layout.host_names}
    except Exception as exc:  # reported to the parent, which asserts on it
        result = {"error": type(exc).__name__, "message": str(exc)}
    result["seconds"] = time.monotonic() - began
    Path(out_dir, f"{rank}.json").write_text(json.dumps(result))


@pytest.mark.timeout(180)
@pytest.mark.parametrize("bad", [0, 2])
def test_a_rank_that_cannot_play_fails_every_rank_at_once(tmp_path, bad):
    """Its error reaches the others through the store, long before their 600 s timeout."""
    entries = ["hostA:0", "hostA:1", "hostB:0"]
    entries[bad] = "hostB:9"  # the p4d file has GPUs 0..7
    cfg = {"topology_file": P4D, "play": ",".join(entries), "timeout_s": 600.0}
    results = _run(tmp_path, [cfg] * 3)
    for rank, result in enumerate(results):
        assert result.get("error") == "ValueError", result
        assert "GPU 9 on 'hostB'" in result["message"], result
        if rank != bad:
            where = "raised on group rank 2" if bad == 2 else "reported by group rank 0"
            assert where in result["message"], result


@pytest.mark.timeout(180)
def test_a_bad_play_entry_without_a_file_fails_every_rank_at_once(tmp_path, monkeypatch):
    for var in ("TORCH_TOPO_FILE", "NCCL_TOPO_FILE", "TORCH_TOPO_PLAY"):
        monkeypatch.delenv(var, raising=False)
    world = 3
    start_processes(_layout_main, nprocs=world,
                    args=(world, str(tmp_path / "store"), ["a:0", "b", "c:0"], str(tmp_path)))
    results = [json.loads((tmp_path / f"{r}.json").read_text()) for r in range(world)]
    for result in results:
        assert result.get("error") == "ValueError", result
        assert "TopoConfig.play (TORCH_TOPO_PLAY): entry 'b': expected HOST:GPU" in \
            result["message"], result
        assert result["seconds"] < 60, result
    assert "raised on group rank 1" in results[0]["message"]


def test_missing_rank_times_out_naming_it(tmp_path):
    store = dist.FileStore(str(tmp_path / "store"), 2)
    cfg = TopoConfig(topology_file=P4D, play="hostA:0", timeout_s=1.0)
    with pytest.raises(TimeoutError, match=r"records of ranks \[1\] of 2"):
        exchange_cluster(store, 0, 2, cfg)


def test_single_live_rank_is_its_own_host(tmp_path, monkeypatch):
    for var in ("TORCH_TOPO_FILE", "NCCL_TOPO_FILE", "TORCH_TOPO_PLAY"):
        monkeypatch.delenv(var, raising=False)
    store = dist.FileStore(str(tmp_path / "store"), 1)
    cluster = exchange_cluster(store, 0, 1, TopoConfig(timeout_s=5.0))
    assert cluster.hostnames == [socket.gethostname()]
    assert cluster.placements[0].local_gpu == -1  # no CUDA on this machine
    assert cluster.inter_host_bandwidth_gbps == 0.0


@pytest.mark.parametrize(
    "spec, size, rank, expected",
    [
        ("n0:3", 4, 2, ("n0", 3)),
        ("a:0,a:1,b:0", 3, 2, ("b", 0)),
        ("host:with:colon:1", 1, 0, ("host:with:colon", 1)),
    ],
)
def test_parse_play(spec, size, rank, expected):
    assert parse_play(spec, size, rank) == expected


@pytest.mark.parametrize(
    "spec, fragment",
    [
        ("a:0,b:0", r"got 2 entries, expected 1 \(this rank\) or 3"),
        ("a", "expected HOST:GPU"),
        (":1", "expected HOST:GPU"),
        ("a:-1", "expected HOST:GPU"),
        ("a:0,b:0,", "entry '': expected HOST:GPU"),
        ("a:0,,b:0", "entry '': expected HOST:GPU"),
        (" :0,b:0,c:0", "entry ':0': expected HOST:GPU"),
        ("n0-0,n1:0,n1:1", "entry 'n0-0': expected HOST:GPU"),
    ],
)
def test_bad_play_specs(spec, fragment):
    # The exchange, the hierarchy's host names and init_device_mesh's placements read play
    # through one parser: each refuses the same strings.
    with pytest.raises(ValueError, match=fragment):
        parse_play(spec, 3, 0)
    with pytest.raises(ValueError, match=fragment):
        played_placements(spec, 3)


def test_play_spec_for_a_world_of_one_rank():
    # The message read "expected 1 (this rank) or 1 (one per rank)".
    with pytest.raises(ValueError, match=r"^TopoConfig.play \(TORCH_TOPO_PLAY\): got 2 entries, "
                                         r"expected 1 \(a world of one rank\)$"):
        parse_play("a:0,b:0", 1, 0)


def test_play_entries_index_the_world_not_the_group(monkeypatch):
    # A subgroup that is not covered by an earlier exchange still reads play by global rank.
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda: 4)
    assert parse_play("a:0,a:1,b:0,b:1", 2, 3) == ("b", 1)
    with pytest.raises(ValueError, match=r"got 2 entries, expected 1 \(this rank\) or 4"):
        parse_play("a:0,b:0", 2, 1)
    assert played_placements("a:0,a:1,b:0,b:1", 4) == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    assert played_placements("solo:3", 4) is None and played_placements("solo:3", 1) == [("solo", 3)]


def test_play_needs_a_pinned_file_and_a_gpu_it_has(tmp_path, monkeypatch):
    for var in ("TORCH_TOPO_FILE", "NCCL_TOPO_FILE"):
        monkeypatch.delenv(var, raising=False)
    store = dist.FileStore(str(tmp_path / "store"), 1)
    with pytest.raises(ValueError, match="needs a pinned topology file"):
        exchange_cluster(store, 0, 1, TopoConfig(play="a:0"))
    with pytest.raises(ValueError, match="GPU 8 on 'a'.*has 8 GPUs, expected 0..7"):
        exchange_cluster(store, 0, 1, TopoConfig(play="a:8", topology_file=P4D))
    with pytest.raises(ValueError, match="group_rank: got 2"):
        exchange_cluster(store, 2, 2, TopoConfig())


@pytest.mark.parametrize("args,kwargs,match", [
    # group_rank 1.0 passed 0 <= 1.0 < 2 and published under "1.0": rank 0 waited for "1"
    # until the timeout. The others were AttributeErrors or a TypeError of `<`.
    ((1.0, 2), {}, r"exchange_cluster: group_rank: got 1.0, expected an int in 0..1"),
    ((True, 2), {}, r"exchange_cluster: group_rank: got True"),
    ((0, "2"), {}, r"exchange_cluster: group_size: got '2', expected an int >= 1"),
    ((0, 1), {"config": {"timeout_s": 5}}, r"exchange_cluster: config: got dict, expected a "
                                           r"torch_topo.TopoConfig or None"),
    ((0, 1), {"global_rank": -1}, r"exchange_cluster: global_rank: got -1, expected None or "
                                  r"an int >= 0"),
    ((0, 1), {"global_ranks": [1.5]}, r"exchange_cluster: global_ranks: got \(1.5,\), "
                                      r"expected ints >= 0"),
])
def test_exchange_arguments(tmp_path, args, kwargs, match):
    store = dist.FileStore(str(tmp_path / "store"), 1)
    with pytest.raises(ValueError, match=match):
        exchange_cluster(store, *args, **kwargs)
    with pytest.raises(ValueError, match=r"exchange_cluster: store: got NoneType, expected a "
                                         r"torch.distributed.Store"):
        exchange_cluster(None, 0, 1)


def _reuse_main(rank, world, store_path, out_dir, tamper):
    from torch_topo import _C, cluster

    # One world store under every group's prefixes, as the backend creator's stores wrap it.
    base = dist.FileStore(store_path, world)
    dist.init_process_group("gloo", store=base, rank=rank, world_size=world)
    cfg = TopoConfig(topology_file=P4D, play="hostA:0,hostA:1,hostB:0", timeout_s=60.0,
                     inter_host_gbps=7.0, inter_host_latency_us=30.0)
    whole = cluster.exchange_cluster(dist.PrefixStore("world", base),
                                     rank, world, cfg, global_ranks=range(world))

    def no_probe(*_args):
        raise AssertionError("probed again although an earlier exchange covers the group")

    cluster._probe_own_record = no_probe
    cluster._own_records.clear()
    if tamper and rank == 1:  # rank 1 remembers another GPU for rank 2
        cluster._exchanges[0][2][2]["local_device"] = 5
    result = {"hosts": whole.hostnames}
    if rank in (1, 2):
        store = dist.PrefixStore("sub", base)
        try:
            sub = cluster.exchange_cluster(store, rank - 1, 2, TopoConfig(timeout_s=60.0),
                                           global_ranks=[1, 2])
            result["sub"] = [sub.hostnames, [p.local_gpu for p in sub.placements]]
            # A later group's own network figures win over those the reused exchange pinned.
            store = dist.PrefixStore("pinned", base)
            pinned = cluster.exchange_cluster(store, rank - 1, 2, TopoConfig(
                timeout_s=60.0, inter_host_gbps=0.01, inter_host_latency_us=500.0),
                global_ranks=[1, 2])
            result["network"] = [[c.inter_host_bandwidth_gbps, c.inter_host_latency_us]
                                 for c in (sub, pinned)]
        except _C.TopoMismatchError as exc:
            result["error"] = str(exc)
    result["exchanges"] = len(cluster._exchanges)
    Path(out_dir, f"{rank}.json").write_text(json.dumps(result))
    dist.barrier()
    dist.destroy_process_group()


@pytest.mark.timeout(180)
@pytest.mark.parametrize("tamper", [False, True])
def test_later_group_reuses_the_exchange_after_a_digest_check(tmp_path, tamper):
    start_processes(_reuse_main, args=(3, str(tmp_path / "store"), str(tmp_path), tamper),
                    nprocs=3)
    results = [json.loads((tmp_path / f"{r}.json").read_text()) for r in range(3)]
    assert all(r["exchanges"] == 1 and r["hosts"] == ["hostA", "hostB"] for r in results)
    for r in results[1:]:
        if tamper:
            assert "reuses other topology records than group rank" in r["error"], r
        else:
            # Ranks 1 and 2 play hostA:1 and hostB:0: the subgroup spans both hosts.
            assert r["sub"] == [["hostA", "hostB"], [1, 0]], r
            assert r["network"] == [[7.0, 30.0], [0.01, 500.0]], r


@pytest.mark.timeout(120)
def test_hosts_of_two_shapes_write_one_host_record_each():
    import threading

    from torch_topo import cluster
    from torch_topo.cluster import HOST_PREFIX, TABLE_KEY

    store = dist.HashStore()
    plays = [("hostA", 0, P4D), ("hostA", 1, P4D), ("hostB", 3, DGX2), ("hostB", 0, DGX2)]
    out = {}

    def rank(r):
        host, gpu, path = plays[r]
        cfg = TopoConfig(topology_file=path, play=f"{host}:{gpu}", timeout_s=60.0)
        try:
            out[r] = exchange_cluster(dist.PrefixStore("g", store), r, 4, cfg)
        except Exception as exc:  # reported below
            out[r] = exc

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in range(4):
        assert not isinstance(out[r], Exception), out[r]
        assert out[r].hostnames == ["hostA", "hostB"]
        assert [h.gpu_count for h in out[r].hosts] == [8, 16]
        assert [[p.host, p.local_gpu, p.local_rank] for p in out[r].placements] == [
            [0, 0, 0], [0, 1, 1], [1, 3, 0], [1, 0, 1]]
    # Two shapes: the table names two host records, each written once for two ranks.
    group = dist.PrefixStore("g", store)
    _, digests = cluster._decode_table(group.get(TABLE_KEY))
    assert len(digests) == 2
    for d in digests:
        assert group.add(f"torch_topo/cluster/writer/{d}", 0) == 2
        assert group.check([f"{HOST_PREFIX}{d}"])


def test_rank_and_host_out_of_range_name_the_problem():
    # A list index before: host_of(-1) answered for the last rank, host_of(1) was a bare
    # IndexError and ranks_on_host(1) an empty list.
    cfg = TopoConfig(topology_file=P4D, play="hostA:0", timeout_s=60.0)
    one = exchange_cluster(dist.PrefixStore("range", dist.HashStore()), 0, 1, cfg)
    assert one.host_of(0) == 0 and one.ranks_on_host(0) == [0]
    with pytest.raises(ValueError, match=r"Cluster.host_of: rank: got -1, expected an int in 0..0"):
        one.host_of(-1)
    with pytest.raises(ValueError, match=r"Cluster.host_of: rank: got 1, expected"):
        one.host_of(1)
    with pytest.raises(ValueError, match=r"Cluster.ranks_on_host: host: got 1, expected an int"):
        one.ranks_on_host(1)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("configured", [None, 12.5])
def test_planner_sees_every_nic_of_an_exchanged_cluster(tmp_path, configured):
    # Two hosts of 8 H100 with 9 NICs of 400 Gbit/s each. The exchange's own figure is one NIC
    # (50 GB/s, what the size rule takes); handed to the planner it capped each host's whole
    # network at that NIC: a 1 GiB all_reduce over both hosts was priced 6x slower than the
    # same cluster written by hand. Only TopoConfig.inter_host_gbps may set that figure.
    import threading

    from torch_topo import _C, load_topology

    host = json.loads(load_topology(
        str(DATA / "nvidia_smi_topo" / "PARTIAL_nccl1453_8xH100_NV18_9xNIC.tsv.txt")).to_json())
    for nic in host["nics"]:
        nic["speed_gbps"] = 400.0
    for gpu in host["gpus"]:
        gpu["sm"] = 90
    path = tmp_path / "h100.json"
    path.write_text(json.dumps(host))
    store, out = dist.HashStore(), {}

    def rank(r):
        cfg = TopoConfig(topology_file=str(path), play=f"host{r // 8}:{r % 8}", timeout_s=60.0,
                         inter_host_gbps=configured)
        out[r] = exchange_cluster(dist.PrefixStore("nics", store), r, 16, cfg)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out[0].inter_host_bandwidth_gbps == (configured or 50.0)
    hosts = [dict(host, hostname=f"host{h}") for h in range(2)]
    by_hand = {"schema": "torch-topo/1", "kind": "cluster", "hosts": hosts,
               "ranks": [{"host": r // 8, "local_gpu": r % 8, "local_rank": r % 8}
                         for r in range(16)],
               "inter_host_latency_us": out[0].inter_host_latency_us}
    if configured:
        by_hand["inter_host_bandwidth_gbps"] = configured
    ranks = [list(range(16))]
    want = _C.PlannerCluster(json.dumps(by_hand)).estimate("all_reduce", 1 << 30, ranks)
    got = _C.PlannerCluster(json.dumps(out[0].planner_doc())).estimate("all_reduce", 1 << 30,
                                                                       ranks)
    assert got["seconds"] == pytest.approx(want["seconds"], rel=1e-12)
    assert got["algorithm"] == want["algorithm"]


def _new_world_main(rank, world, store_path, out_dir):
    from torch_topo import cluster

    dist.init_process_group("gloo", store=dist.FileStore(store_path, world), rank=rank,
                            world_size=world)
    first = cluster.world_cluster(TopoConfig(topology_file=P4D, play="hostA:0,hostA:1,hostB:0",
                                             timeout_s=60.0))
    result = {"first": first.hostnames}
    dist.barrier()
    dist.destroy_process_group()
    if rank > 0:  # old ranks 1 and 2 form a world of two on another played host
        dist.init_process_group("gloo", store=dist.FileStore(store_path + "2", 2),
                                rank=rank - 1, world_size=2)
        second = cluster.world_cluster(TopoConfig(topology_file=P4D, play="hostC:0,hostC:1",
                                                  timeout_s=60.0))
        result["second"] = [second.hostnames, [p.local_gpu for p in second.placements]]
        dist.destroy_process_group()
    Path(out_dir, f"{rank}.json").write_text(json.dumps(result))


@pytest.mark.timeout(120)
def test_a_new_world_does_not_reuse_the_old_worlds_records(tmp_path):
    # A world of another backend clears nothing at its creation: its world_cluster (and so
    # init_device_mesh) came back with the old world's records of its global ranks, the records
    # of other processes (here: hostA's GPUs 0 and 1 for ranks on hostC).
    start_processes(_new_world_main, args=(3, str(tmp_path / "store"), str(tmp_path)), nprocs=3)
    results = [json.loads((tmp_path / f"{r}.json").read_text()) for r in range(3)]
    assert all(r["first"] == ["hostA", "hostB"] for r in results)
    assert [r["second"] for r in results[1:]] == [[["hostC"], [0, 1]]] * 2


def _port_main(rank, port, out_dir):
    import gc

    import torch_topo  # noqa: F401  (registers "topo")

    dist.init_process_group("topo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    dist.destroy_process_group()
    gc.collect()
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            result = "free"
        except OSError as exc:
            result = str(exc)
    Path(out_dir, "port.json").write_text(json.dumps(result))


@pytest.mark.timeout(60)
def test_the_world_store_is_not_kept_after_the_world(tmp_path):
    # The kept exchanges held the world's store, so rank 0's TCPStore server went on listening
    # on the master port after destroy_process_group (EADDRINUSE for whatever came next).
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start_processes(_port_main, args=(port, str(tmp_path)), nprocs=1)
    assert json.loads((tmp_path / "port.json").read_text()) == "free"
