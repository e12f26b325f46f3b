// SPDX-License-Identifier: Apache-2.0
// The sysfs stage of the live probe (layer: csrc/topo): NUMA nodes and CPUs when hwloc is absent,
// the host's physical NICs with their line rates, which of them are AWS EFAs, the instance type,
// and the NUMA node of a PCI device. Every function takes the sysfs root ("/sys" live, a built
// tree in tests).
#pragma once

#include <string>
#include <vector>

#include "topo/graph.h"

namespace torch_topo::topo {

/// NUMA nodes with their cpulists from <root>/devices/system/node/node*/cpulist, or one node 0
/// holding <root>/devices/system/cpu/online on kernels without NUMA. Throws InvalidArgument
/// naming the file when a cpulist is garbage, Unavailable when neither source is readable.
std::vector<NumaNode> readSysfsNumaNodes(const std::string& root);

/// The physical NICs, one per PCI function, in bus id order:
///   - every interface of <root>/class/net and RDMA device of <root>/class/infiniband whose
///     `device` link exists. Interfaces without one (everything under /sys/devices/virtual/net:
///     lo, ifb, veth, bridges, bonds, tun/tap, dummy, docker*, cni*, flannel*) and software RDMA
///     devices (rxe, siw) move no bytes of their own and are left out; bond slaves and SR-IOV
///     functions are PCI functions and stay.
///   - bus id: the PCI function the link resolves to or lies under (virtio-net's link ends at
///     .../0000:00:03.0/virtio2);
///   - name: the RDMA device when a PCI function has one (what NCCL_IB_HCA names), else the
///     interface;
///   - speed: IB port 1 `rate`, else the interface's `speed` (Mbit/s); -1, absent or unreadable
///     (EINVAL on a link that is down) is unknown (0);
///   - NUMA node: the PCI function's `numa_node`, -1 when it says -1 or nothing.
/// Throws Unavailable when <root>/class/net cannot be listed (sysfs not mounted).
std::vector<Nic> readSysfsNics(const std::string& root);

/// True for RDMA device `name` of <root>/class/infiniband when it is an AWS EFA: its PCI function
/// is Amazon's (`vendor` 0x1d0f; Amazon's other NIC, ENA, has no RDMA device) or is bound to
/// driver efa.
bool isSysfsEfaDevice(const std::string& root, const std::string& name);

/// The first line of <root>/devices/virtual/dmi/id/product_name (on EC2 the instance type,
/// "p5.48xlarge"), "" when absent or unreadable.
std::string readSysfsProductName(const std::string& root);

/// NUMA node of PCI device `bus_id` (<root>/bus/pci/devices/<bus_id>/numa_node), -1 when unknown.
int readSysfsPciNumaNode(const std::string& root, const std::string& bus_id);

/// True for a PCI address in sysfs form: "dddd:bb:dd.f", lower-case hex, function 0-7, the
/// domain of 4 to `max_domain_digits` hex digits (hwloc writes VMD's as 10000).
bool isPciBusId(const std::string& text, size_t max_domain_digits = 4);

}  // namespace torch_topo::topo
