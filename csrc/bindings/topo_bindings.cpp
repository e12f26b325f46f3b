// SPDX-License-Identifier: Apache-2.0
// Python bindings of the topo layer (layer: csrc/bindings): the exception classes every layer
// raises, the topology model types, and the readers/writers of csrc/topo.
#include <pybind11/stl.h>

#include "bindings/bindings.h"
#include "topo/error.h"
#include "topo/fuzz.h"
#include "topo/link_tables.h"
#include "topo/graph.h"
#include "topo/loader.h"
#include "topo/nccl_xml.h"
#include "topo/nvlink_inference.h"
#include "topo/nvsmi_reader.h"
#include "topo/topology_json.h"

namespace torch_topo::bindings {
namespace {

using namespace torch_topo::topo;  // NOLINT: the binding file of this namespace

// Owned by the module (attributes hold a reference); live as long as the interpreter.
PyObject* g_topo_error = nullptr;
PyObject* g_parse_error = nullptr;
PyObject* g_unavailable_error = nullptr;
PyObject* g_mismatch_error = nullptr;

void registerExceptions(py::module_& m) {
  g_topo_error = makeException(m, "TopoError", PyExc_RuntimeError,
                               "Base of every error of the torch-topo core (a RuntimeError).");
  py::tuple parse_bases = py::make_tuple(py::handle(g_topo_error), py::handle(PyExc_ValueError));
  g_parse_error =
      makeException(m, "TopoParseError", parse_bases.ptr(),
                    "A topology file or text is malformed. Also a ValueError. The message starts\n"
                    "`path:line:col:`; the attributes `path`, `line` and `column` carry the same.");
  g_unavailable_error = makeException(
      m, "TopoUnavailableError", g_topo_error,
      "An optional system library (NVML, hwloc) is missing; the message names the fix.");
  g_mismatch_error =
      makeException(m, "TopoMismatchError", g_topo_error,
                    "Ranks or sources disagree about something that must be identical.");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ParseError& e) {
      py::object exc = py::reinterpret_borrow<py::object>(g_parse_error)(e.what());
      exc.attr("path") = e.path();
      exc.attr("line") = e.line();
      exc.attr("column") = e.column();
      PyErr_SetObject(g_parse_error, exc.ptr());
    } catch (const Unavailable& e) {
      PyErr_SetString(g_unavailable_error, e.what());
    } catch (const Mismatch& e) {
      PyErr_SetString(g_mismatch_error, e.what());
    } catch (const InvalidArgument& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const Error& e) {
      PyErr_SetString(g_topo_error, e.what());
    }
  });
  m.def(
      "_test_raise_error", [](const std::string& msg) { throw Error(msg); },
      "Raises the C++ topo::Error (-> TopoError). For tests of the mapping.\n\nArgs:\n"
      "    msg: the message.");
  m.def(
      "_test_raise_parse_error",
      [](const std::string& path, int line, int col, const std::string& msg) {
        throw ParseError(path, line, col, msg);
      },
      "Raises topo::ParseError (-> TopoParseError).\n\nArgs:\n    path: file name.\n"
      "    line: 1-based line.\n    col: 1-based column.\n    msg: what was expected.");
  m.def(
      "_test_raise_unavailable", [](const std::string& msg) { throw Unavailable(msg); },
      "Raises topo::Unavailable (-> TopoUnavailableError).\n\nArgs:\n    msg: the message.");
  m.def(
      "_test_raise_mismatch", [](const std::string& msg) { throw Mismatch(msg); },
      "Raises topo::Mismatch (-> TopoMismatchError).\n\nArgs:\n    msg: the message.");
  m.def(
      "_test_raise_invalid_argument", [](const std::string& msg) { throw InvalidArgument(msg); },
      "Raises topo::InvalidArgument (-> ValueError).\n\nArgs:\n    msg: the message.");
}

void checkIndex(const char* what, long i, size_t n) {
  if (i < 0 || static_cast<size_t>(i) >= n) {
    throw py::index_error(std::string(what) + " index " + std::to_string(i) + " out of range [0, " +
                          std::to_string(n) + ")");
  }
}

void defModelTypes(py::module_& m) {
  py::class_<Gpu>(m, "Gpu", "One GPU of a host.")
      .def(py::init<>())
      .def_readwrite("index", &Gpu::index, "CUDA index (PCI bus order) or nvidia-smi numbering.")
      .def_readwrite("bus_id", &Gpu::bus_id, "PCI bus id, empty when the source has none.")
      .def_readwrite("name", &Gpu::name)
      .def_readwrite("sm", &Gpu::sm, "Compute capability x 10, 0 when unknown.")
      .def_readwrite("numa_node", &Gpu::numa_node, "Nearest CPU NUMA node, -1 when unknown.")
      .def_readwrite("cpu_affinity", &Gpu::cpu_affinity, "cpulist, empty when unknown.")
      .def_readwrite("memory_numa_node", &Gpu::memory_numa_node)
      .def_readwrite("nvlink_domain", &Gpu::nvlink_domain);
  py::class_<Nic>(m, "Nic", "One network interface of a host.")
      .def(py::init<>())
      .def_readwrite("name", &Nic::name)
      .def_readwrite("bus_id", &Nic::bus_id)
      .def_readwrite("numa_node", &Nic::numa_node)
      .def_readwrite("speed_gbps", &Nic::speed_gbps, "Line rate in Gbit/s, 0 when unknown.")
      .def_readwrite("latency_us", &Nic::latency_us,
                     "Latency NCCL's net plugin reports (NCCL XML <net latency>), 0 when none.");
  py::class_<NumaNode>(m, "NumaNode", "A NUMA domain and its CPUs.")
      .def(py::init<>())
      .def_readwrite("id", &NumaNode::id)
      .def_readwrite("cpus", &NumaNode::cpus);
  py::class_<PathInfo>(m, "PathInfo", "Best path between two devices.")
      .def(py::init<>())
      .def_property_readonly(
          "cls", [](const PathInfo& p) { return std::string(toString(p.cls)); },
          "Path class: X, NV, PIX, PXB, PHB, NODE, SYS or NET.")
      .def_readwrite("nvlinks", &PathInfo::nvlinks)
      .def_readwrite("bandwidth_gbps", &PathInfo::bandwidth_gbps, "GB/s per direction.")
      .def_readwrite("latency_us", &PathInfo::latency_us);
  py::class_<RankPlacement>(m, "RankPlacement", "Where one rank runs.")
      .def(py::init<>())
      .def_readwrite("host", &RankPlacement::host)
      .def_readwrite("local_gpu", &RankPlacement::local_gpu)
      .def_readwrite("local_rank", &RankPlacement::local_rank);
  py::class_<HostTopology>(m, "HostTopology", "Everything known about one host.")
      .def(py::init<>())
      .def_readwrite("hostname", &HostTopology::hostname)
      .def_readonly("source", &HostTopology::source)
      .def_readonly("format", &HostTopology::format)
      .def_readonly("gpus", &HostTopology::gpus)
      .def_readonly("nics", &HostTopology::nics)
      .def_readonly("numa_nodes", &HostTopology::numa_nodes)
      .def_readonly("warnings", &HostTopology::warnings)
      .def_property_readonly("gpu_count", &HostTopology::gpuCount)
      .def_property_readonly(
          "has_graph", [](const HostTopology& h) { return !h.graph.nodes.empty(); },
          "True when the source described the physical PCI/NVLink graph.")
      .def(
          "path",
          [](const HostTopology& h, long i, long j) {
            checkIndex("GPU", i, h.gpus.size());
            checkIndex("GPU", j, h.gpus.size());
            return h.path(static_cast<int>(i), static_cast<int>(j));
          },
          "Path between two GPUs.\n\nArgs:\n    i: position of the first GPU in `gpus`.\n"
          "    j: position of the second GPU.",
          py::arg("i"), py::arg("j"))
      .def(
          "nic_path",
          [](const HostTopology& h, long i, long k) {
            checkIndex("GPU", i, h.gpus.size());
            checkIndex("NIC", k, h.nics.size());
            if (h.gpu_nic_paths.size() != h.gpus.size() * h.nics.size()) {
              throw py::value_error("this topology has no GPU-to-NIC paths");
            }
            return h.gpu_nic_paths[i * h.nics.size() + k];
          },
          "Path from a GPU to a NIC.\n\nArgs:\n    i: position of the GPU in `gpus`.\n"
          "    k: position of the NIC in `nics`.",
          py::arg("i"), py::arg("k"));
  py::class_<ClusterTopology>(m, "ClusterTopology",
                              "Hosts joined by a network, and rank placements.")
      .def(py::init<>())
      .def_readwrite("hosts", &ClusterTopology::hosts)
      .def_readwrite("ranks", &ClusterTopology::ranks)
      .def_readwrite("inter_host_bandwidth_gbps", &ClusterTopology::inter_host_bandwidth_gbps)
      .def_readwrite("inter_host_latency_us", &ClusterTopology::inter_host_latency_us);
}

void defReaders(py::module_& m) {
  py::call_guard<py::gil_scoped_release> nogil;
  m.def("load_topology_file", &loadTopologyFile, nogil,
        "Reads a topology file of any accepted format (sniffed by content).\n\nArgs:\n"
        "    path: nvidia-smi text, NCCL topology XML, hwloc XML or torch-topo JSON.\n\n"
        "Raises:\n    TopoParseError: malformed or unknown content (path:line:col: ...).\n"
        "    ValueError: the file cannot be read.",
        py::arg("path"));
  m.def("load_topology_text", &loadTopologyText, nogil,
        "Parses topology text of any accepted format.\n\nArgs:\n    text: the content.\n"
        "    path: name used in error messages.",
        py::arg("text"), py::arg("path") = "<string>");
  m.def("load_cluster_file", &loadClusterFile, nogil,
        "Reads a cluster JSON, or any host file as a one-host cluster.\n\nArgs:\n"
        "    path: the file.",
        py::arg("path"));
  m.def("nvlink_lane_gbps", &nvlinkLaneGBps,
        "GB/s per NVLink lane per direction as NCCL rates a GPU of compute capability sm\n"
        "(x 10); sm <= 0 (unknown) gives the sm80 rate the readers assume.\n\nArgs:\n"
        "    sm: compute capability x 10.",
        py::arg("sm"));
  m.def(
      "sniff_topology_format",
      [](const std::string& text) { return std::string(toString(sniffTopologyFormat(text))); },
      "Format of a topology text: nvidia-smi, nccl-xml, nccl-graph-xml, hwloc-xml,\n"
      "torch-topo-json or unknown.\n\nArgs:\n    text: the content.",
      py::arg("text"));
  m.def("host_to_json", &hostToJson, nogil,
        "Serialises a host as torch-topo JSON (schema torch-topo/1).\n\nArgs:\n"
        "    host: the HostTopology.\n    indent: spaces per level, -1 for one line.",
        py::arg("host"), py::arg("indent") = -1);
  m.def("host_from_json", &hostFromJson, nogil,
        "Parses a torch-topo host JSON.\n\nArgs:\n    text: the JSON.\n"
        "    path: name used in error messages.",
        py::arg("text"), py::arg("path") = "<string>");
  m.def("cluster_to_json", &clusterToJson, nogil,
        "Serialises a cluster as torch-topo JSON.\n\nArgs:\n    cluster: the ClusterTopology.\n"
        "    indent: spaces per level, -1 for one line.",
        py::arg("cluster"), py::arg("indent") = -1);
  m.def("cluster_from_json", &clusterFromJson, nogil,
        "Parses a torch-topo cluster JSON.\n\nArgs:\n    text: the JSON.\n"
        "    path: name used in error messages.",
        py::arg("text"), py::arg("path") = "<string>");
  m.def("to_nccl_xml", &writeNcclXml, nogil,
        "Writes a host as NCCL topology XML (NCCL_TOPO_FILE).\n\nArgs:\n"
        "    host: a HostTopology with a physical graph (not nvidia-smi text).\n\n"
        "Raises:\n    ValueError: the topology has no PCI tree to write.",
        py::arg("host"));
  m.def(
      "_fuzz_topology_texts",
      [](const std::vector<std::string>& corpus, uint64_t seed, int count) {
        FuzzReport r;
        {
          py::gil_scoped_release release;
          r = fuzzTopologyTexts(corpus, seed, count);
        }
        py::dict out;
        out["inputs"] = r.inputs;
        out["parsed"] = r.parsed;
        out["rejected"] = r.rejected;
        out["failure_count"] = r.failure_count;
        out["failures"] = r.failures;
        return out;
      },
      "Feeds mutants of `corpus` to the loader (see csrc/topo/fuzz.h); for tests.\n\nArgs:\n"
      "    corpus: texts to mutate.\n    seed: RNG seed.\n    count: number of mutants.",
      py::arg("corpus"), py::arg("seed"), py::arg("count"));
}

void defNvlinkCompletion(py::module_& m) {
  m.attr("NO_NVLINK_WARNING") = kNoNvlinkWarning;
  m.attr("PCIE_ONLY_MATRIX_WARNING") = kPcieOnlyMatrixWarning;
  m.def(
      "complete_nvlink",
      [](HostTopology& host, const HostTopology* live) {
        return std::string(toString(completeNvlink(host, live)));
      },
      "Fills in place the NVLink an NCCL XML host leaves out (csrc/topo/nvlink_inference.h):\n"
      "from `live` when it describes the same host, else from the GPU model, else a warning.\n\n"
      "Args:\n    host: the pinned file's HostTopology.\n    live: the live probe's, or None.\n\n"
      "Returns:\n    where its NVLink now comes from: none, file, live-probe, inferred, unknown.",
      py::arg("host"), py::arg("live") = nullptr);
  m.def(
      "nvlink_origin",
      [](const HostTopology& host) { return std::string(toString(nvlinkOrigin(host))); },
      "Where a host's NVLink paths come from: none, file, live-probe, inferred, unknown.\n\n"
      "Args:\n    host: the HostTopology.",
      py::arg("host"));
  m.def("describes_same_host", &describesSameHost,
        "True when two hosts are one machine: same hostname or the same GPU bus ids.\n\n"
        "Args:\n    file: a topology read from a file.\n    live: the live probe's.",
        py::arg("file"), py::arg("live"));
}

}  // namespace

PyObject* makeException(py::module_& m, const char* name, PyObject* bases, const char* doc) {
  std::string qualified = std::string("torch_topo._C.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (cls == nullptr) throw py::error_already_set();
  m.add_object(name, py::handle(cls));
  return cls;
}

void defTopo(py::module_& m) {
  registerExceptions(m);
  defModelTypes(m);
  defReaders(m);
  defNvlinkCompletion(m);
}

}  // namespace torch_topo::bindings
