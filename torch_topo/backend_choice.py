# SPDX-License-Identifier: Apache-2.0
"""The flat/hierarchical choice the "topo" backend makes for a plan's groups, so that `plan`,
`doctor` and `init_device_mesh` report that choice rather than the cost model's own.

Where every rank of a group has a GPU the backend takes the size ranges the planner's cost
model scans for the group (`computeHierarchicalThresholds`), or those TopoConfig.hierarchical
fixes ("never", "always"); between the scanned powers of two it follows each octave, where the
model's own side compares the exact size. Where a rank has none, Gloo carries the group and
the backend decides by its size rule (`torch_topo.hierarchy.hierarchical_thresholds`) over the
network figures its cluster exchange assembles: TopoConfig's pins, else the cluster's own
figures, else the hosts' NICs. `BackendChoices` assembles each such group's cluster from the
same records and asks the backend's code. The cost model then prices the side taken.
"""

from __future__ import annotations

import json

from torch_topo import _C, size_ranges
from torch_topo.cluster import _assemble, _Pins
from torch_topo.config import TopoConfig
from torch_topo.hierarchical_choice import predicted_choices, prefers_hierarchical
from torch_topo.plan import cluster_text
from torch_topo.size_ranges import SizeRanges

__all__ = ["BackendChoices"]


class BackendChoices:
    """The backend's choices for a group's config `config` over the plan's `_C.PlannerCluster`
    `resolved` (groups of GPU ranks) and cluster document `doc` (torch-topo cluster JSON, as
    `resolve_cluster` builds it; groups holding a rank without a GPU). Either may be None,
    leaving those groups to the cost model's own side."""

    def __init__(self, doc: dict | None, config: TopoConfig, resolved=None) -> None:
        self._config = config
        self._resolved = resolved
        self._doc = doc
        if doc is not None:
            # Copies of one host carry one host name; the exchange tells hosts apart by name.
            self._records = [{"hostname": f"host{r['host']}", "local_rank": r["local_rank"],
                              "local_device": r["local_gpu"], "doc": r["host"]}
                             for r in doc["ranks"]]
            self._docs = [json.dumps({**host, "schema": "torch-topo/1", "kind": "host"})
                          for host in doc["hosts"]]
            # A cluster document's own figures stand for what the exchange would pin or measure.
            self._pins = _Pins(
                config.inter_host_gbps or doc.get("inter_host_bandwidth_gbps", 0.0),
                config.inter_host_latency_us or doc.get("inter_host_latency_us", 0.0))
        else:
            self._records = [{"hostname": f"host{resolved.rank_host(r)}",
                              "local_device": resolved.rank_gpu(r)}
                             for r in range(resolved.world_size)]
        self._groups: dict[tuple, tuple[dict[str, SizeRanges], object, list[int]]] = {}

    @classmethod
    def of(cls, topology_or_cluster, hosts: int, config: TopoConfig,
           resolved) -> BackendChoices:
        """The choices over what `resolve_cluster(topology_or_cluster, hosts)` reads, `resolved`
        being that `_C.PlannerCluster`. The document is read again only where a rank has no
        GPU; a PlannerCluster source has none left, and its groups with such a rank keep the
        cost model's side."""
        if isinstance(topology_or_cluster, _C.PlannerCluster) or all(
                resolved.rank_gpu(r) >= 0 for r in range(resolved.world_size)):
            return cls(None, config, resolved)
        return cls(json.loads(cluster_text(topology_or_cluster, hosts)), config, resolved)

    def group(self, ranks: list[int]) -> tuple[dict[str, SizeRanges], object, list[int]] | None:
        """(size ranges, choice model, the group's ranks in that model) the backend gives the
        group of `ranks` (in group-rank order) when it spans hosts: for GPU ranks the ranges
        the planner's cost model scans (or the config fixes), for a group holding a rank
        without a GPU those of the size rule over the network its exchange would assemble;
        None where the group stays on one host or no model of it is at hand."""
        from torch_topo.hierarchy import (
            HostLayout,
            choice_model,
            configured_ranges,
            hierarchical_thresholds,
            planner_ranges,
        )

        records = [self._records[r] for r in ranks]
        host_count = len({rec["hostname"] for rec in records})
        if host_count < 2:
            return None
        if all(rec["local_device"] >= 0 for rec in records):
            if self._resolved is None:
                return None
            key = ("gpu", *ranks)
            if key not in self._groups:
                fixed = configured_ranges(self._config, host_count)
                ranges = planner_ranges(self._resolved, list(ranks)) if fixed is None else fixed
                self._groups[key] = (ranges, self._resolved, list(ranks))
            return self._groups[key]
        if self._doc is None:
            return None
        key = tuple((rec["hostname"], rec["local_device"] < 0) for rec in records)
        if key not in self._groups:
            # Assembled per kind of group only: assembling every group of a large plan costs
            # seconds.
            cluster = _assemble(records, self._pins, 0, self._docs)
            layout = HostLayout.from_cluster(cluster)
            self._groups[key] = (hierarchical_thresholds(layout, self._config, cluster=cluster),
                                 choice_model(layout, self._config, cluster),
                                 list(range(len(ranks))))
        return self._groups[key]

    def decides(self, groups: list[list[int]]) -> bool:
        """Whether the backend's rule decides any of a dimension's `groups`."""
        return any(self.group(g) is not None for g in groups)

    def estimate(self, model, op: str, nbytes: int, groups: list[list[int]]) -> dict:
        """`model.estimate` (a `_C.PlannerCluster`) of `groups` run at once, on the side the
        backend takes for them at `nbytes`: "hierarchical" where it takes that schedule for
        every group, the model's best flat algorithm where it takes none, else "mixed" priced
        at the slower side (the groups run at once)."""
        both = model.compare_hierarchical(op, nbytes, groups)
        sides = set()
        for g in groups:
            found = self.group(g)
            if found is None:  # the cost model's own side
                sides.add(prefers_hierarchical(model.compare_hierarchical(op, nbytes, [g])))
            else:
                sides.add(size_ranges.contains(found[0].get(op, ()), nbytes))
        # Where the model has no hierarchical schedule for the groups (one rank per host),
        # the backend's levels are the flat exchange across hosts.
        if not both["hierarchical"]["applicable"] or sides == {False}:
            return both["flat"]
        if sides == {True}:
            return both["hierarchical"]
        return {**max(both["flat"], both["hierarchical"], key=lambda s: s["seconds"]),
                "algorithm": "mixed"}

    def predicted(self, op: str, groups: list[list[int]]) -> list[str]:
        """The predicted lines of `op` (both sides' times and the side the group's ranges
        take) for each distinct choice among the groups the backend decides, each line led by
        its first group when they differ: GPU groups of the same ranges priced together, as
        the plan prices a dimension; a group holding a rank without a GPU by the size rule's
        times, as TORCH_TOPO_DEBUG prints them."""
        found: dict[tuple, list[int]] = {}
        together: dict[tuple, tuple[dict, list[list[int]]]] = {}
        for g in groups:
            choice = self.group(g)
            if choice is None:
                continue
            if choice[1] is self._resolved:
                together.setdefault(tuple(sorted(choice[0].items())), (choice[0], []))[1].append(g)
                continue
            lines = tuple(predicted_choices(choice[1], [choice[2]], ops=(op,),
                                            thresholds=choice[0]))
            found.setdefault(lines, g)
        for ranges, same in together.values():
            lines = tuple(predicted_choices(self._resolved, same, ops=(op,), thresholds=ranges))
            found.setdefault(lines, same[0])
        if len(found) == 1:
            return list(next(iter(found)))
        return [f"group {g}: {line}" for lines, g in found.items() for line in lines]
