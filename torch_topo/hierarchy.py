# SPDX-License-Identifier: Apache-2.0
"""Topology-derived inner groups of the "topo" backend (intra-host, NIC rails, leaders).

`attach_hierarchy` is called by the backend creator on member ranks only, after the flat inner
backends exist; it may add hierarchical levels to the C++ backend. With one host, or
`use_topo_aware_collectives=False`, the backend stays flat.
"""

from __future__ import annotations

__all__ = ["attach_hierarchy"]


def attach_hierarchy(backend, store, group_rank, group_size, global_ranks, config) -> None:
    """Flat for now: the hierarchical levels arrive with the schedules (see docs/backend.md)."""
    return None
