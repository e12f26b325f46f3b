# SPDX-License-Identifier: Apache-2.0
"""Emulated multi-node clusters on one Linux machine (network namespaces, veth, tc); the entry
point is `python -m torch_topo.emulate`, documented in docs/emulator.md."""
