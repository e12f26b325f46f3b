# SPDX-License-Identifier: Apache-2.0
"""The flat/hierarchical choice the "topo" backend makes for a plan's groups of ranks without a
GPU, so that `plan`, `doctor` and `init_device_mesh` report that choice.

Where every rank of a group has a GPU the backend decides with the planner's cost model, which
the plan already holds. Where one has none, Gloo carries the group and the backend decides by
its size rule (`torch_topo.hierarchy.hierarchical_thresholds`) over the network figures its
cluster exchange assembles: TopoConfig's pins, else the cluster's own figures, else the hosts'
NICs. `BackendChoices` assembles each group's cluster from the same records and asks the
backend's code; the cost model then prices the side it takes.
"""

from __future__ import annotations

import json

from torch_topo import _C, size_ranges
from torch_topo.cluster import _assemble, _Pins
from torch_topo.config import TopoConfig
from torch_topo.plan import _cluster_text, predicted_choices, prefers_hierarchical
from torch_topo.size_ranges import SizeRanges

__all__ = ["BackendChoices"]


class BackendChoices:
    """The backend's choices over cluster document `doc` (torch-topo cluster JSON, as
    `resolve_cluster` builds it) for a group's config `config`."""

    def __init__(self, doc: dict, config: TopoConfig) -> None:
        self._config = config
        # Copies of one host carry one host name; the exchange tells hosts apart by name.
        self._records = [{"hostname": f"host{r['host']}", "local_rank": r["local_rank"],
                          "local_device": r["local_gpu"], "doc": r["host"]}
                         for r in doc["ranks"]]
        self._docs = [json.dumps({**host, "schema": "torch-topo/1", "kind": "host"})
                      for host in doc["hosts"]]
        # A cluster document's own figures stand for what the exchange would pin or measure.
        self._pins = _Pins(config.inter_host_gbps or doc.get("inter_host_bandwidth_gbps", 0.0),
                           config.inter_host_latency_us or doc.get("inter_host_latency_us", 0.0))
        self._groups: dict[tuple, tuple[dict[str, SizeRanges], object]] = {}

    @classmethod
    def of(cls, topology_or_cluster, hosts: int, config: TopoConfig,
           resolved) -> BackendChoices | None:
        """The choices over what `resolve_cluster(topology_or_cluster, hosts)` reads, `resolved`
        being that `_C.PlannerCluster`; None where it places every rank on a GPU (the cost model
        decides every group, and the document need not be read again) or for a PlannerCluster
        source, whose document is gone."""
        if isinstance(topology_or_cluster, _C.PlannerCluster) or all(
                resolved.rank_gpu(r) >= 0 for r in range(resolved.world_size)):
            return None
        return cls(json.loads(_cluster_text(topology_or_cluster, hosts)), config)

    def group(self, ranks: list[int]) -> tuple[dict[str, SizeRanges], object] | None:
        """(thresholds, choice model) the backend gives the group of `ranks` (in group-rank
        order) when it holds a rank without a GPU and spans hosts; None where the planner's
        cost model decides (every rank on a GPU) or the group stays flat on one host."""
        from torch_topo.hierarchy import HostLayout, choice_model, hierarchical_thresholds

        records = [self._records[r] for r in ranks]
        # Told from the records first: assembling every GPU group of a large plan costs seconds.
        if (all(rec["local_device"] >= 0 for rec in records)
                or len({rec["hostname"] for rec in records}) < 2):
            return None
        key = tuple((rec["hostname"], rec["local_device"] < 0) for rec in records)
        if key not in self._groups:
            cluster = _assemble(records, self._pins, 0, self._docs)
            layout = HostLayout.from_cluster(cluster)
            self._groups[key] = (hierarchical_thresholds(layout, self._config, cluster=cluster),
                                 choice_model(layout, self._config, cluster))
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
        """The predicted lines of `op` (the rule's times, as TORCH_TOPO_DEBUG prints them, and
        the side its thresholds take) for each distinct choice among the groups the backend's
        rule decides, each line led by its first group when they differ."""
        found: dict[tuple, list[int]] = {}
        for g in groups:
            choice = self.group(g)
            if choice is not None:
                lines = tuple(predicted_choices(choice[1], [list(range(len(g)))], ops=(op,),
                                                thresholds=choice[0]))
                found.setdefault(lines, g)
        if len(found) == 1:
            return list(next(iter(found)))
        return [f"group {g}: {line}" for lines, g in found.items() for line in lines]
