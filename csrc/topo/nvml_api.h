// SPDX-License-Identifier: Apache-2.0
// The NVML calls the live probe needs, behind an abstract interface (layer: csrc/topo) so tests
// inject a fake built from a real topology file, as torchcomms does with its NcclApi.
#pragma once

#include <array>
#include <set>
#include <string>

namespace torch_topo::topo {

/// nvmlReturn_t values the probe tells apart (nvml.h); any other is reported by number.
constexpr int kNvmlSuccess = 0;
constexpr int kNvmlErrorNotSupported = 3;

/// nvmlGpuFabricState_t: how far the GPU's registration with the NVLink fabric got.
enum class NvmlFabricState : unsigned char {
  NotSupported = 0,
  NotStarted = 1,
  InProgress = 2,
  Completed = 3
};

/// NVML's answer to the GPU fabric query (nvmlDeviceGetGpuFabricInfoV, r550+, else
/// nvmlDeviceGetGpuFabricInfo, r535), as returned: the probe decides what counts as a domain.
struct NvmlFabricInfo {
  int result = kNvmlErrorNotSupported;  // nvmlReturn_t of the call; the rest only on success
  std::array<unsigned char, 16> cluster_uuid{};  // NVML_GPU_FABRIC_UUID_LEN
  int status = kNvmlSuccess;  // nvmlReturn_t of the registration, meaningful once Completed
  unsigned clique_id = 0;     // "partitionId" in r535's nvml.h, same place
  NvmlFabricState state = NvmlFabricState::NotSupported;
};

/// What sits at the far end of an NVLink (nvmlIntNvLinkDeviceType_t).
enum class NvlinkPeer { Gpu, Cpu, Switch, Unknown };

/// The subset of NVML (libnvidia-ml) the probe uses. Device indexes are NVML's; every query
/// returns false when NVML reports an error or "not supported", so callers handle absences
/// without exceptions (an A10 has no NVLink, old drivers have no NUMA query).
class NvmlApi {
 public:
  /// NVML_NVLINK_MAX_LINKS in nvml.h since r535 (18 links: H100).
  static constexpr int kMaxLinks = 18;

  virtual ~NvmlApi() = default;
  /// True when the library was loaded and initialised.
  virtual bool available() const = 0;
  /// Why NVML is unavailable ("libnvidia-ml.so.1: cannot open shared object file"), "" if it is.
  virtual std::string unavailableReason() const = 0;
  /// Number of GPUs NVML sees (0 when unavailable).
  virtual int deviceCount() = 0;
  /// PCI bus id as "dddd:bb:dd.f", lower-case hex (the form hwloc and sysfs use).
  virtual bool pciBusId(int dev, std::string* bus_id) = 0;
  /// Marketing name ("NVIDIA H100 80GB HBM3").
  virtual bool name(int dev, std::string* name) = 0;
  /// CUDA compute capability x 10 (90 for sm_90).
  virtual bool computeCapability(int dev, int* sm) = 0;
  /// NUMA node NVML names for the GPU (nvmlDeviceGetNumaNodeId): its PCI attachment's, except
  /// where the GPU's own memory is a NUMA node (GH200, GB200), which is then the one named and
  /// has no CPUs.
  virtual bool numaNode(int dev, int* node) = 0;
  /// CPUs NVML deems local to the GPU (nvmlDeviceGetCpuAffinity, NUMA node scope). Not pure:
  /// stand-ins without it answer as a driver lacking the call does.
  virtual bool cpuAffinity(int /*dev*/, std::set<int>* /*cpus*/) { return false; }
  /// Bus id and kind of the device at the far end of NVLink `link` (0 .. kMaxLinks-1); false
  /// when the link is absent or inactive. `kind` is Unknown where the driver cannot tell
  /// (nvmlDeviceGetNvLinkRemoteDeviceType appeared in r450).
  virtual bool nvlinkRemote(int dev, int link, std::string* remote_bus_id, NvlinkPeer* kind) = 0;
  /// The GPU's multi-node NVLink fabric. Unlike the queries above, NVML's answer is passed on
  /// whatever it is (errors in `info->result`), since a fabric the GPU is still joining differs
  /// from none; false only when the driver has neither call (before r535) or `dev` has no
  /// handle.
  virtual bool gpuFabric(int dev, NvmlFabricInfo* info) = 0;
};

}  // namespace torch_topo::topo
