# SPDX-License-Identifier: Apache-2.0
"""The planner's split of sequence parallelism (resolve_sequence_parallel_degrees): Ulysses
inside the fastest clique, ring across. Checked on the real topology files of tests/data, one
and two hosts, against an exhaustive search written here: the largest Ulysses degree for which
the ranks can be cut into groups inside one host whose every pair is joined by the fastest link
between GPUs of a host."""

from __future__ import annotations

import pytest
from planner_support import DGX1, topology_files

from torch_topo import UlyssesConfig, resolve_sequence_parallel_degrees
from torch_topo.ops.sequence_parallel import _sequence_mesh
from torch_topo.plan import Plan, resolve_cluster


def _cliques_cover(fast, ranks: list[int], size: int) -> bool:
    """Can `ranks` be cut into groups of `size` whose pairs all satisfy `fast`? (backtracking)"""
    if not ranks:
        return True
    first, rest = ranks[0], ranks[1:]

    def extend(group, candidates):
        if len(group) == size:
            return _cliques_cover(fast, [r for r in rest if r not in group], size)
        for i, r in enumerate(candidates):
            if all(fast(r, g) for g in group) and extend(group + [r], candidates[i + 1:]):
                return True
        return False

    return extend([first], [r for r in rest if fast(first, r)])


def _fastest_link(cluster):
    """(best intra-host pair bandwidth, predicate: a pair in one host on such a link)."""
    world = cluster.world_size
    same = [[cluster.rank_host(a) == cluster.rank_host(b) for b in range(world)]
            for a in range(world)]
    best = max(cluster.bandwidth(a, b) for a in range(world) for b in range(a + 1, world)
               if same[a][b])
    return best, lambda a, b: same[a][b] and cluster.bandwidth(a, b) >= best


def _reference_degree(cluster, sp: int) -> int:
    _, fast = _fastest_link(cluster)
    return max(u for u in range(1, sp + 1)
               if sp % u == 0 and _cliques_cover(fast, list(range(cluster.world_size)), u))


CASES = [(path, hosts) for path in topology_files(max_gpus=8) for hosts in (1, 2)]


@pytest.mark.parametrize("path, hosts", CASES, ids=[f"{p.name}-x{h}" for p, h in CASES])
def test_split_is_the_largest_fastest_clique(path, hosts):
    cluster = resolve_cluster(str(path), hosts)
    world = cluster.world_size
    for sp in sorted({world, world // 2} - {0, 1}):
        ulysses, ring = resolve_sequence_parallel_degrees(
            UlyssesConfig(sequence_parallel_size=sp), world, cluster)
        assert ulysses * ring == sp
        assert ulysses == _reference_degree(cluster, sp), (path.name, hosts, sp)
        # The planner's Ulysses groups of that degree are such cliques.
        plan = Plan.build(cluster, _sequence_mesh(world, sp, ulysses))
        _, fast = _fastest_link(cluster)
        for group in plan.groups("sp"):
            assert all(fast(a, b) for a in group for b in group if a < b)


def test_dgx1_pairs_and_two_hosts():
    # On a DGX-1 only the NV2 pairs are fastest: Ulysses 2, ring over the rest (read off the
    # file: the hybrid cube mesh has 4 NV2 pairs per host).
    cluster = resolve_cluster(str(DGX1), 2)
    assert resolve_sequence_parallel_degrees(UlyssesConfig(sequence_parallel_size=16), 16,
                                             cluster) == (2, 8)


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
    out = {}
    for name, cfg, plan in (("auto", UlyssesConfig(sequence_parallel_size=4), None),
                            ("given", UlyssesConfig(sequence_parallel_size=4, ulysses_degree=2),
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

    import torch.multiprocessing as mp

    mp.start_processes(_groups_main, args=(4, str(tmp_path / "store"), str(tmp_path)),
                       nprocs=4, start_method="spawn")
    hosts = {0: "A", 1: "B", 2: "A", 3: "B"}
    for rank in range(4):
        out = json.loads((tmp_path / f"{rank}.json").read_text())
        for name, (sp_ranks, ring_ranks) in out.items():
            assert len(sp_ranks) == 2 and {hosts[r] for r in sp_ranks} == {hosts[rank]}, name
            assert len(ring_ranks) == 2 and {hosts[r] for r in ring_ranks} == {"A", "B"}, name
