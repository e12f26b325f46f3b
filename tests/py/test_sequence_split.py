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
