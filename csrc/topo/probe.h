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
/// at `sysfs_root` ("/sys" live; a built tree in tests):
///   - hostname (gethostname), NUMA nodes with cpulists and the PCI tree from hwloc, else the
///     NUMA nodes and CPUs of /sys/devices/system/{node,cpu}, else one NUMA node of unknown CPUs;
///   - NICs: the physical ones of /sys (readSysfsNics: virtual interfaces are left out), with
///     line rate, PCI bus id and NUMA node, joined to hwloc's PCI tree by bus id; hwloc's NICs
///     when /sys cannot be listed; AWS EFA NICs carry the latency aws-ofi-nccl reports to NCCL
///     (net_plugin_latency.h; a malformed OFI_NCCL_NET_LATENCY is the "aws-ofi-nccl" source's
///     warning);
///   - GPUs and NVLink from NVML only (hwloc's own GPU objects are dropped, so a host without
///     the NVIDIA driver reports zero GPUs, with a warning, not an error);
///   - gpu_paths and gpu_nic_paths from the paths stage.
/// Each source runs isolated: whatever it throws (a reader's ParseError, a library's or a fake's
/// exception) costs only its own facts and adds one warning
///   "probe:<source> failed: <reason>; <what the probe did instead>; <fix>"
/// while an expected absence (no NVML on a CPU machine, hwloc not built in) adds
///   "probe:<source>: <reason>; <what the probe did instead>".
/// So the probe throws only for `require_gpus`: Unavailable naming the cause and the fix when no
/// GPU is found.
HostTopology probeHost(HwlocApi* hwloc, NvmlApi* nvml, const std::string& sysfs_root = "/sys",
                       bool require_gpus = false);

/// probeHost with libhwloc (when built in) and NVML loaded from the driver.
HostTopology probeThisHost(bool require_gpus = false);

}  // namespace torch_topo::topo
