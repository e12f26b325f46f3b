// SPDX-License-Identifier: Apache-2.0
// The live probe of this host (layer: csrc/topo): hwloc for NUMA and the PCI tree (or /sys when
// hwloc is absent), /sys for NIC speeds, NVML for GPUs and NVLink.
#pragma once

#include <string>

#include "topo/graph.h"
#include "topo/hwloc_api.h"
#include "topo/nvml_api.h"

namespace torch_topo::topo {

/// Probes a host through the given APIs (either may be null or unavailable) and the sysfs tree
/// at `sysfs_root` ("/sys" live; a copied tree in tests):
///   - hostname (gethostname), NUMA nodes with cpulists and the PCI tree from hwloc, else the
///     NUMA nodes and CPUs of /sys/devices/system/{node,cpu} with a warning saying why;
///   - NICs: every interface of /sys/class/net except loopback, then every RDMA device of
///     /sys/class/infiniband, with line rate (net `speed` in Mbit/s, IB port 1 `rate`), PCI bus
///     id and NUMA node where the device has them;
///   - GPUs and NVLink from NVML only (hwloc's own GPU objects are dropped, so a host without
///     the NVIDIA driver reports zero GPUs, with a warning, not an error);
///   - gpu_paths from the paths stage.
/// `require_gpus` turns "no GPU found" into Unavailable naming the cause and the fix.
HostTopology probeHost(HwlocApi* hwloc, NvmlApi* nvml, const std::string& sysfs_root = "/sys",
                       bool require_gpus = false);

/// probeHost with libhwloc (when built in) and NVML loaded from the driver.
HostTopology probeThisHost(bool require_gpus = false);

}  // namespace torch_topo::topo
