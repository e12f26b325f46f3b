# SPDX-License-Identifier: Apache-2.0
"""The Ulysses x ring split of sequence parallelism (torch_topo.ops.sequence_split and
resolve_sequence_parallel_degrees): on the real topology files of tests/data, one and two
hosts, several attention shapes, the choice is compared with an exhaustive reference written
here: every split, its validity derived from the sharded layout, its time summed from the cost
model's public estimate over the planned groups, the fastest valid one."""

from __future__ import annotations

import math

import pytest
import torch
from planner_support import DGX1, topology_files

from torch_topo import AttentionShape, UlyssesConfig, resolve_sequence_parallel_degrees
from torch_topo.cli import main
from torch_topo.ops.sequence_parallel import sequence_parallel_candidates
from torch_topo.ops.sequence_split import choose_sequence_split, split_mesh
from torch_topo.plan import Plan, resolve_cluster

NVSWITCH = DGX1.parent / "h100_8xSXM_NV18_2socket_mlengineering.txt"

# Shapes that rule out different splits: MHA, GQA (kv < some degrees: replicated K/V), MQA,
# few heads, a sequence length that only small rings divide.
SHAPES = [
    AttentionShape(heads=32, kv_heads=8, head_dim=128, seq_len=8192),
    AttentionShape(heads=16, kv_heads=16, head_dim=64, seq_len=4096, batch=2,
                   dtype=torch.float32),
    AttentionShape(heads=8, kv_heads=1, head_dim=128, seq_len=16384),
    AttentionShape(heads=4, kv_heads=2, head_dim=16, seq_len=64, batch=4, dtype=torch.float32),
    AttentionShape(heads=6, kv_heads=3, head_dim=64, seq_len=24, dtype=torch.float16),
]


def _layout_ok(shape: AttentionShape, ulysses: int, ring: int) -> bool:
    """Heads split over Ulysses (K/V split or replicated), and the zigzag layout exists: the
    sequence cuts into 2R equal chunks, a rank's two chunks (its ring block) cut into U equal
    contiguous shards."""
    if shape.heads % ulysses or (shape.kv_heads % ulysses and ulysses % shape.kv_heads):
        return False
    if ring == 1:
        return shape.seq_len % ulysses == 0
    if shape.seq_len % (2 * ring):
        return False
    return (2 * (shape.seq_len // (2 * ring))) % ulysses == 0


def _reference_seconds(cluster, world: int, shape: AttentionShape, ulysses: int,
                       ring: int) -> float:
    """Forward and backward of one layer: Q/K/V and output all-to-alls twice each on the
    planned sp groups; 2 (R - 1) K/V steps and R fp32 dK/dV steps on the cp groups, one step
    being one block per rank to its successor."""
    plan = Plan.build(cluster, {"dp": world // (ulysses * ring), "cp": ring, "sp": ulysses})
    e = torch.finfo(shape.dtype).bits // 8
    local = shape.batch * shape.seq_len // (ulysses * ring)
    kv_per_dest = max(shape.kv_heads // ulysses, 1)  # K/V heads each destination receives
    total = 0.0
    if ulysses > 1:
        for heads in (shape.heads + 2 * kv_per_dest * ulysses, shape.heads):
            t = cluster.estimate("all_to_all", local * heads * shape.head_dim * e,
                                 plan.groups("sp"))
            total += 2 * t["seconds"]
    if ring > 1:
        block = 2 * shape.batch * shape.seq_len // ring * kv_per_dest * shape.head_dim
        for nbytes, steps in ((block * e, 2 * (ring - 1)), (block * 4, ring)):
            gather = cluster.estimate("all_gather", ring * nbytes, plan.groups("cp"), "ring")
            total += steps * gather["seconds"] / (ring - 1)
    return total


CASES = [(path, hosts) for path in topology_files(max_gpus=8) for hosts in (1, 2)]


@pytest.mark.parametrize("path, hosts", CASES, ids=[f"{p.name}-x{h}" for p, h in CASES])
def test_split_is_the_fastest_valid_one(path, hosts):
    cluster = resolve_cluster(str(path), hosts)
    world = cluster.world_size
    for sp in sorted({world, world // 2} - {0, 1}):
        for shape in SHAPES:
            cfg = UlyssesConfig(sequence_parallel_size=sp, attention=shape)
            candidates = sequence_parallel_candidates(cfg, world, cluster)
            assert [(c.ulysses, c.ring) for c in candidates] == \
                [(u, sp // u) for u in range(1, sp + 1) if sp % u == 0]
            reference = {}
            for c in candidates:
                assert c.valid == _layout_ok(shape, c.ulysses, c.ring), (c, shape)
                if c.valid:
                    want = _reference_seconds(cluster, world, shape, c.ulysses, c.ring)
                    assert c.seconds == pytest.approx(want, rel=1e-9, abs=1e-15)
                    reference[(c.ulysses, c.ring)] = want
            if not reference:
                with pytest.raises(ValueError, match="no Ulysses x ring split fits"):
                    resolve_sequence_parallel_degrees(cfg, world, cluster)
                continue
            fastest = min(reference.values())
            got = resolve_sequence_parallel_degrees(cfg, world, cluster)
            assert reference[got] == pytest.approx(fastest, rel=1e-9, abs=1e-15), (
                path.name, hosts, sp, shape, got, reference)


def test_heads_decide_on_an_nvswitch_host():
    # The old rule took Ulysses 8 on any NVSwitch host; 4 query heads cannot split over 8.
    cluster = resolve_cluster(str(NVSWITCH))
    shape = AttentionShape(heads=4, kv_heads=2, head_dim=64, seq_len=4096)
    u, r = resolve_sequence_parallel_degrees(
        UlyssesConfig(sequence_parallel_size=8, attention=shape), 8, cluster)
    assert u * r == 8 and 4 % u == 0


def test_cpu_world_of_four_takes_a_valid_split():
    # The example's defaults on 4 CPU ranks (issue 23: Ulysses 4 was picked and refused).
    doc = {"schema": "torch-topo/1", "kind": "cluster",
           "hosts": [{"hostname": "local", "gpus": []}],
           "ranks": [{"host": 0, "local_gpu": -1, "local_rank": r} for r in range(4)]}
    shape = AttentionShape(heads=4, kv_heads=2, head_dim=16, seq_len=64, batch=4,
                           dtype=torch.float32)
    cfg = UlyssesConfig(sequence_parallel_size=4, attention=shape)
    candidates = sequence_parallel_candidates(cfg, 4, resolve_cluster(doc))
    assert [c.valid for c in candidates] == [True, True, True]  # kv 2 < U 4: replicated
    assert choose_sequence_split(candidates).ulysses in (1, 2, 4)


def test_live_cpu_ranks_across_hosts_are_split_at_gloo_latency(tmp_path, monkeypatch):
    # A live world of CPU ranks on two hosts: Gloo carries the split's all-to-alls and ring
    # steps, whose steps between hosts the backend prices at gloo_latency_us (50 us here), not
    # at the exchange's 2.7 us (NCCL's network hop), and here the split taken depends on it.
    # Reference: the candidates priced on the same hosts at the backend's latency.
    from planner_support import played_cpu_ranks

    import torch_topo.mesh as mesh
    from torch_topo import _C, TopoConfig
    from torch_topo.cluster import Cluster
    from torch_topo.hierarchy import gloo_latency_us
    from torch_topo.ops.sequence_split import sequence_split_candidates

    for var in ("TORCH_TOPO_FILE", "NCCL_TOPO_FILE", "TORCH_TOPO_PLAY",
                "TORCH_TOPO_INTER_HOST_LATENCY_US", "TORCH_TOPO_INTER_HOST_GBPS"):
        monkeypatch.delenv(var, raising=False)
    doc, path = played_cpu_ranks(tmp_path, 2.7)
    live = Cluster(_C.load_cluster_file(str(path)), 0)  # what the exchange assembles
    monkeypatch.setattr(mesh, "world_cluster", lambda _config: live)
    shape = AttentionShape(heads=32, kv_heads=1, head_dim=64, seq_len=256, batch=1)
    gloo = gloo_latency_us(live, TopoConfig.from_env())
    split = {}
    for us in (2.7, gloo):
        best = choose_sequence_split(sequence_split_candidates(
            resolve_cluster({**doc, "inter_host_latency_us": us}), {"dp": 1, "sp": 8}, shape,
            contiguous=True))
        split[us] = (best.ulysses, best.ring)
    assert split[2.7] != split[gloo]
    cfg = UlyssesConfig(sequence_parallel_size=8, attention=shape)
    assert resolve_sequence_parallel_degrees(cfg, 8) == split[gloo]


def test_pinned_file_is_planned_on_before_any_process_group(monkeypatch):
    # world_size given and TORCH_TOPO_FILE pinned: nothing needs torch.distributed (it asked
    # for the default group's size). Reference: the same split priced on the file passed in.
    import torch.distributed as dist

    assert not dist.is_initialized()
    monkeypatch.setenv("TORCH_TOPO_FILE", str(DGX1))
    shape = AttentionShape(heads=8, kv_heads=8, head_dim=64, seq_len=8192)
    cfg = UlyssesConfig(sequence_parallel_size=8, attention=shape)
    assert resolve_sequence_parallel_degrees(cfg, 8) == resolve_sequence_parallel_degrees(
        cfg, 8, resolve_cluster(str(DGX1)))


def test_no_valid_split_names_every_problem():
    shape = AttentionShape(heads=3, kv_heads=3, head_dim=8, seq_len=5)
    cfg = UlyssesConfig(sequence_parallel_size=2, attention=shape)
    with pytest.raises(ValueError, match=r"Ulysses 1 x ring 2: seq_len 5 not a multiple of 4; "
                                         r"Ulysses 2 x ring 1: heads 3 not a multiple of the "
                                         r"Ulysses degree 2"):
        resolve_sequence_parallel_degrees(cfg, 8, resolve_cluster(str(DGX1)))


@pytest.mark.parametrize("world", [8, 4, 32])
def test_cluster_of_another_world_size_is_refused(world):
    # Two DGX-1 hosts hold 16 ranks. A smaller or larger world_size was priced as if the
    # cluster held it (the planner refused each split naming a mesh never given), and a shape
    # that rules out every split came back as that list without a word.
    cluster = resolve_cluster(str(DGX1), 2)
    assert cluster.world_size == 16
    fits = AttentionShape(heads=32, kv_heads=8, head_dim=128, seq_len=8192)
    rules_all_out = AttentionShape(heads=3, kv_heads=3, head_dim=16, seq_len=7)
    for shape in (fits, rules_all_out):
        cfg = UlyssesConfig(sequence_parallel_size=4, attention=shape)
        with pytest.raises(ValueError, match=rf"^sequence_parallel_candidates: world_size: got "
                                             rf"{world}, expected the 16 ranks of the cluster"):
            sequence_parallel_candidates(cfg, world, cluster)
        with pytest.raises(ValueError, match=rf"world_size: got {world}, expected the 16 ranks"):
            resolve_sequence_parallel_degrees(cfg, world, cluster)
    # Its own world size is still priced (the split checks of test_split_is_the_fastest_valid_one).
    cfg = UlyssesConfig(sequence_parallel_size=4, attention=fits)
    assert [c.valid for c in sequence_parallel_candidates(cfg, 16, cluster)] == [True] * 3


def test_world_size_defaults_to_the_cluster_given():
    # Without a process group: the cluster's rank count, not "Default process group has not
    # been initialized".
    import torch.distributed as dist

    assert not dist.is_initialized()
    cluster = resolve_cluster(str(DGX1), 2)
    cfg = UlyssesConfig(sequence_parallel_size=4, attention=AttentionShape(
        heads=32, kv_heads=8, head_dim=128, seq_len=8192))
    assert sequence_parallel_candidates(cfg, cluster=cluster) == \
        sequence_parallel_candidates(cfg, 16, cluster)
    assert resolve_sequence_parallel_degrees(cfg, cluster=cluster) == \
        resolve_sequence_parallel_degrees(cfg, 16, cluster)


def test_open_split_needs_the_shape():
    with pytest.raises(ValueError, match="UlyssesConfig.attention: not set"):
        resolve_sequence_parallel_degrees(UlyssesConfig(sequence_parallel_size=4), 8,
                                          resolve_cluster(str(DGX1)))


def test_given_degrees_are_kept_and_checked():
    cfg = UlyssesConfig(sequence_parallel_size=8, ulysses_degree=4)
    assert resolve_sequence_parallel_degrees(cfg, 8, cluster=object()) == (4, 2)
    assert cfg.ring_degree == 2
    no_ring = UlyssesConfig(sequence_parallel_size=4, enable_ring_exchange=False)
    assert resolve_sequence_parallel_degrees(no_ring, 8, cluster=object()) == (4, 1)
    with pytest.raises(ValueError, match="ulysses_degree: got 3, expected None or an int >= 1 "
                                         "dividing sequence_parallel_size 8"):
        UlyssesConfig(sequence_parallel_size=8, ulysses_degree=3)
    with pytest.raises(ValueError, match="enable_ring_exchange=False, expected 4"):
        UlyssesConfig(sequence_parallel_size=4, ulysses_degree=2, enable_ring_exchange=False)
    with pytest.raises(ValueError, match="does not divide the world size 6"):
        resolve_sequence_parallel_degrees(UlyssesConfig(sequence_parallel_size=4), 6)
    with pytest.raises(ValueError, match="UlyssesConfig.attention: got 3"):
        UlyssesConfig(sequence_parallel_size=4, attention=3)


@pytest.mark.parametrize("kwargs,match", [
    ({"heads": 0}, r"AttentionShape.heads: got 0, expected an int >= 1"),
    ({"kv_heads": 3}, r"AttentionShape.kv_heads: got 3, expected a divisor of heads 8"),
    ({"dtype": torch.int32}, r"AttentionShape.dtype: got torch.int32"),
    ({"seq_len": 2.0}, r"AttentionShape.seq_len: got 2.0"),
])
def test_shape_validation(kwargs, match):
    base = {"heads": 8, "kv_heads": 2, "head_dim": 64, "seq_len": 128}
    with pytest.raises(ValueError, match=match):
        AttentionShape(**{**base, **kwargs})


@pytest.mark.parametrize("text,match", [
    ("heads=8,kv_heads=2,head_dim=64", r"--attention: got .*, missing seq_len"),
    ("heads=8,kv=2", r"--attention: got 'kv=2', expected NAME=VALUE"),
    ("heads=8,kv_heads=2,head_dim=64,seq_len=x", r"--attention: seq_len: got 'x'"),
    ("heads=8,kv_heads=3,head_dim=64,seq_len=64", r"--attention: AttentionShape.kv_heads"),
    ("heads=8,kv_heads=2,head_dim=64,seq_len=64,dtype=int8", r"--attention: dtype: got 'int8'"),
    # isdigit() passed "²" on to int(): "invalid literal for int() with base 10".
    ("heads=²,kv_heads=1,head_dim=64,seq_len=64", r"--attention: heads: got '²', expected an "
                                                  r"integer >= 1"),
    # Not a string: AttributeError "'NoneType' object has no attribute 'split'".
    (None, r"--attention: got NoneType, expected a string such as"),
    (32, r"--attention: got int, expected a string such as"),
])
def test_shape_parse_errors(text, match):
    with pytest.raises(ValueError, match=match):
        AttentionShape.parse(text)


def test_shape_parse():
    assert AttentionShape.parse("heads=8, kv_heads=2,head_dim=64,seq_len=64,batch=3,dtype=fp16") \
        == AttentionShape(heads=8, kv_heads=2, head_dim=64, seq_len=64, batch=3,
                          dtype=torch.float16)


def test_split_mesh_keeps_the_order():
    assert list(split_mesh({"dp": 2, "sp": 8, "tp": 1}, 2).items()) == \
        [("dp", 2), ("cp", 4), ("sp", 2), ("tp", 1)]


def test_plan_cli_shows_candidates_and_plans_the_winner(capsys):
    shape = "heads=8,kv_heads=2,head_dim=128,seq_len=8192"
    assert main(["plan", str(DGX1), "--hosts", "2", "--mesh", "sp=16", "--attention",
                 shape]) == 0
    text = capsys.readouterr().out
    cluster = resolve_cluster(str(DGX1), 2)
    cfg = UlyssesConfig(sequence_parallel_size=16, attention=AttentionShape.parse(shape))
    candidates = sequence_parallel_candidates(cfg, 16, cluster)
    best = choose_sequence_split(candidates)
    for c in candidates:
        line = next(ln for ln in text.splitlines()
                    if ln.startswith(f"  Ulysses {c.ulysses} x ring {c.ring}:"))
        if c.valid:
            assert f"{c.seconds * 1e3:.3f} ms" in line
        else:
            assert "not possible" in line
        assert line.endswith("<- chosen") == (c is best)
    assert f"cp={best.ring} x sp={best.ulysses}" in text
    assert main(["plan", str(DGX1), "--hosts", "2", "--mesh", "sp=16", "--attention", shape,
                 "--json"]) == 0
    import json

    out = json.loads(capsys.readouterr().out)
    split = out["sequence_split"]
    assert (split["chosen"]["ulysses"], split["chosen"]["ring"]) == (best.ulysses, best.ring)
    assert [c["seconds"] for c in split["candidates"]] == [
        c.seconds if c.valid else None for c in candidates]
    assert out["mesh_dim_names"] == ["cp", "sp"]
    assert math.prod(out["mesh_shape"]) == 16


@pytest.mark.parametrize("argv,fragment", [
    (["--mesh", "dp=2,tp=4", "--attention", "heads=8,kv_heads=2,head_dim=64,seq_len=64"],
     "expected an 'sp' dimension"),
    (["--mesh", "ring=2,sp=4", "--attention", "heads=8,kv_heads=2,head_dim=64,seq_len=64"],
     "and no 'cp' or 'ring'"),
    (["--mesh", "sp=8", "--traffic", "sp=1e9", "--attention",
      "heads=8,kv_heads=2,head_dim=64,seq_len=64"], "--traffic: not with --attention"),
    (["--mesh", "sp=8", "--attention", "heads=3,kv_heads=3,head_dim=64,seq_len=5"],
     "no Ulysses x ring split fits"),
    (["--mesh", "sp=8", "--attention", "heads=8"], "--attention: got 'heads=8', missing"),
])
def test_plan_cli_split_errors_exit_2(argv, fragment, capsys):
    assert main(["plan", str(DGX1)] + argv) == 2
    err = capsys.readouterr().err
    assert fragment in err and len(err.strip().splitlines()) == 1


def _groups_main(rank, world, store_path, out_dir):
    import json
    import os
    from pathlib import Path

    import torch.distributed as dist

    from torch_topo import build_sequence_parallel_groups

    # Ranks 0,1 play the NV2 pair (GPUs 0 and 3) of one DGX-1, ranks 2,3 of another, so the
    # planner must keep Ulysses pairs on a host whatever the rank order: here 0,2 share hostA.
    os.environ.update(TORCH_TOPO_FILE=str(DGX1),
                      TORCH_TOPO_PLAY="hostA:0,hostB:0,hostA:3,hostB:3")
    dist.init_process_group("gloo", store=dist.FileStore(store_path, world), rank=rank,
                            world_size=world)
    from torch_topo.mesh import world_planner_cluster

    # A plan of the user's whose ring dimension is called "ring" (the CLI's name) works too.
    own_plan = Plan.build(world_planner_cluster(), {"ring": 2, "sp": 2})
    # Without a cluster argument the split is priced on the one init_device_mesh plans on.
    cfg = UlyssesConfig(sequence_parallel_size=4,
                        attention=AttentionShape(heads=4, kv_heads=2, head_dim=64, seq_len=4096))
    out = {"chosen": [list(resolve_sequence_parallel_degrees(cfg)),
                      list(resolve_sequence_parallel_degrees(cfg, 4, world_planner_cluster()))]}
    for name, cfg, plan in (("given", UlyssesConfig(sequence_parallel_size=4, ulysses_degree=2),
                             None),
                            ("ring_dim", UlyssesConfig(sequence_parallel_size=4), own_plan)):
        sp_group, ring_group = build_sequence_parallel_groups(cfg, plan)
        out[name] = [sorted(dist.get_process_group_ranks(sp_group)),
                     sorted(dist.get_process_group_ranks(ring_group))]
    Path(out_dir, f"{rank}.json").write_text(json.dumps(out))
    dist.barrier()
    dist.destroy_process_group()


@pytest.mark.timeout(180)
def test_groups_follow_the_played_hosts(tmp_path):
    import json

    from rank_processes import start_processes

    start_processes(_groups_main, args=(4, str(tmp_path / "store"), str(tmp_path)),
                    nprocs=4)
    hosts = {0: "A", 1: "B", 2: "A", 3: "B"}
    chosen = []
    for rank in range(4):
        out = json.loads((tmp_path / f"{rank}.json").read_text())
        default, explicit = out.pop("chosen")
        assert default == explicit and math.prod(default) == 4
        chosen.append(default)
        for name, (sp_ranks, ring_ranks) in out.items():
            assert len(sp_ranks) == 2 and {hosts[r] for r in sp_ranks} == {hosts[rank]}, name
            assert len(ring_ranks) == 2 and {hosts[r] for r in ring_ranks} == {"A", "B"}, name
    assert all(c == chosen[0] for c in chosen)
