// SPDX-License-Identifier: Apache-2.0
// The NVML stage of the live probe (layer: csrc/topo): load libnvidia-ml at run time and add the
// GPUs and NVLinks it reports to a host topology.
#pragma once

#include <memory>
#include <string>

#include "topo/graph.h"
#include "topo/nvml_api.h"

namespace torch_topo::topo {

/// The library name the NVIDIA driver installs (no link-time dependency on it).
constexpr const char* kNvmlLibrary = "libnvidia-ml.so.1";

/// dlopens `library` and initialises NVML. Never throws: a missing library or a failed
/// nvmlInit gives an object whose available() is false and whose unavailableReason() says why.
std::unique_ptr<NvmlApi> loadNvml(const std::string& library = kNvmlLibrary);

/// Adds NVML's GPUs to `host` in CUDA PCI-bus order (ascending bus id): `host->gpus`, a Gpu node
/// per GPU (the one the PCI tree already has, else a new node under the CPU of its NUMA node),
/// and NvLink links to each peer, lanes = active links to it: GPU-to-GPU, GPU-to-CPU (peer kind
/// Cpu: POWER), else GPU-to-NVSwitch (any other peer that is not one of the GPUs). An
/// unavailable `nvml` adds nothing. A GPU whose bus id is unreadable, malformed or repeated is
/// skipped with a warning; a link back to the GPU itself is ignored. Each GPU's nvlink_domain
/// comes from NVML's fabric query (docs/probe.md); a query that fails other than with "not
/// supported", or a fabric registration not completed, leaves it empty with a warning. Exceptions
/// of `nvml` propagate (probeHost isolates them).
void addNvmlGpus(NvmlApi* nvml, HostTopology* host);

}  // namespace torch_topo::topo
