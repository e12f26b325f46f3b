// SPDX-License-Identifier: Apache-2.0
// Python bindings of the probe layer (layer: csrc/bindings): the live probe, hwloc XML files and
// the cluster assembled from per-rank records. HostTopology and ClusterTopology are bound by
// topo_bindings.cpp.
#include "bindings/bindings.h"

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "topo/cluster.h"
#include "topo/cpulist.h"
#include "topo/error.h"
#include "topo/hwloc_reader.h"
#include "topo/nvml_probe.h"
#include "topo/probe.h"

namespace torch_topo::bindings {
namespace {

using topo::RankRecord;

// Sources that fail the way a broken host's do, for _test_probe_host: hwloc whose discovery
// throws, NVML that initialised but throws on its first device query.
class FailingHwloc : public topo::HwlocApi {
 public:
  bool available() const override { return true; }
  std::string unavailableReason() const override { return ""; }
  std::string exportXml() override {
    throw topo::Unavailable("hwloc: hwloc_topology_load failed (injected)");
  }
};

class FailingNvml : public topo::NvmlApi {
 public:
  bool available() const override { return true; }
  std::string unavailableReason() const override { return ""; }
  int deviceCount() override { throw std::runtime_error("NVML_ERROR_UNKNOWN (injected)"); }
  bool pciBusId(int, std::string*) override { return false; }
  bool name(int, std::string*) override { return false; }
  bool computeCapability(int, int*) override { return false; }
  bool numaNode(int, int*) override { return false; }
  bool nvlinkRemote(int, int, std::string*, topo::NvlinkPeer*) override { return false; }
  bool gpuFabric(int, topo::NvmlFabricInfo*) override { return false; }
};

topo::HostTopology probeWithFaults(const std::vector<std::string>& faults,
                                   const std::string& sysfs_root) {
  bool hwloc_fails = false, nvml_fails = false;
  for (const std::string& fault : faults) {
    TOPO_CHECK(fault == "hwloc" || fault == "nvml", "_test_probe_host: faults: got '", fault,
               "', expected 'hwloc' or 'nvml' (a failing sysfs is a sysfs_root without class/net)");
    hwloc_fails |= fault == "hwloc";
    nvml_fails |= fault == "nvml";
  }
  FailingHwloc failing_hwloc;
  FailingNvml failing_nvml;
  std::unique_ptr<topo::HwlocApi> hwloc = hwloc_fails ? nullptr : topo::loadHwloc();
  std::unique_ptr<topo::NvmlApi> nvml = nvml_fails ? nullptr : topo::loadNvml();
  return topo::probeHost(hwloc_fails ? &failing_hwloc : hwloc.get(),
                         nvml_fails ? &failing_nvml : nvml.get(), sysfs_root);
}

void defCluster(py::module_& m) {
  py::class_<RankRecord>(m, "RankRecord", "What one rank publishes about itself.")
      .def(py::init([](int rank, std::string hostname, int local_rank, int local_device,
                       std::string host_json, int host_doc) {
             return RankRecord{rank, std::move(hostname), local_rank, local_device,
                               std::move(host_json), host_doc};
           }),
           py::arg("rank"), py::arg("hostname"), py::arg("local_rank"), py::arg("local_device"),
           py::arg("host_json") = "", py::arg("host_doc") = -1,
           R"(Args:
  rank, hostname, local_rank, local_device: where the rank runs.
  host_json: its host topology as torch-topo JSON, or
  host_doc: the index of that JSON in assemble_cluster's host_docs.)")
      .def_readonly("rank", &RankRecord::rank)
      .def_readonly("hostname", &RankRecord::hostname)
      .def_readonly("local_rank", &RankRecord::local_rank)
      .def_readonly("local_device", &RankRecord::local_device);
  m.def(
      "assemble_cluster",
      [](std::vector<RankRecord> records, double bandwidth_gbps, double latency_us,
         std::optional<std::vector<std::string>> host_docs) {
        topo::ClusterOptions options;
        options.inter_host_bandwidth_gbps = bandwidth_gbps;
        options.inter_host_latency_us = latency_us;
        if (host_docs) return topo::assembleCluster(std::move(records), *host_docs, options);
        return topo::assembleCluster(std::move(records), options);
      },
      py::arg("records"), py::arg("inter_host_bandwidth_gbps") = 0.0,
      py::arg("inter_host_latency_us") = 0.0, py::arg("host_docs") = py::none(),
      py::call_guard<py::gil_scoped_release>(),
      R"(Builds the cluster from one record per rank (any order).

Args:
  records: list of RankRecord, ranks 0..n-1 once each.
  host_docs: with it, each record's host graph is host_docs[record.host_doc] (identical hosts
    share one document, parsed once); without it, each record's host_json.
  inter_host_bandwidth_gbps: measured or pinned GB/s between hosts; 0 derives it from NICs.
  inter_host_latency_us: measured or pinned latency; 0 takes NCCL's network hop latency.

Raises TopoMismatchError when ranks of one host published different host graphs.)");
}

}  // namespace

void defProbe(py::module_& m) {
  m.def("probe_host", &topo::probeThisHost, py::arg("require_gpus") = false,
        py::call_guard<py::gil_scoped_release>(),
        R"(Probes this host: hwloc (or /sys) for NUMA and PCI, /sys for NICs, NVML for GPUs.

Args:
  require_gpus: raise TopoUnavailableError instead of reporting zero GPUs.)");
  m.def(
      "export_hwloc_xml", [] { return topo::loadHwloc()->exportXml(); },
      py::call_guard<py::gil_scoped_release>(),
      R"(This host's topology as libhwloc exports it (what `lstopo FILE.xml` writes, I/O devices
included): the live probe's hwloc input, to pin (TORCH_TOPO_FILE) or to compare with.
Raises TopoUnavailableError when built without hwloc or when discovery fails.)");
  m.def("_test_probe_host", &probeWithFaults, py::arg("faults"), py::arg("sysfs_root") = "/sys",
        py::call_guard<py::gil_scoped_release>(),
        R"(The live probe with injected source failures, for tests of the probe's isolation.

Args:
  faults: sources that fail: "hwloc" (its discovery throws), "nvml" (its first query throws).
  sysfs_root: the sysfs tree to read; one without class/net makes the sysfs NIC stage fail.)");
  m.def("read_hwloc_xml", &topo::readHwlocXml, py::arg("text"), py::arg("path"),
        py::call_guard<py::gil_scoped_release>(),
        R"(Parses hwloc XML text into a HostTopology.

Args:
  text: the XML document.
  path: file name used in error messages.)");
  m.def("sm_from_gpu_name", &topo::smFromGpuName, py::arg("name"),
        R"(Compute capability x 10 of a GPU model name as nvidia-smi, NVML or nccl-tests print it
("NVIDIA H100 80GB HBM3" -> 90), by family; 0 for a name it does not know.

Args:
  name: the GPU's marketing name.)");
  m.def("parse_cpulist", &topo::parseCpulist, py::arg("text"), py::arg("where") = "cpulist",
        R"(Parses a Linux cpulist ("0-3,8") into a set of CPU ids.

Args:
  text: the cpulist.
  where: what the text is, for the error message.)");
  defCluster(m);
}

}  // namespace torch_topo::bindings
