// SPDX-License-Identifier: Apache-2.0
// The readers, writers and error messages of csrc/topo do not depend on the C++ global locale.
// On a real H200 host a module linked with a private libstdc++ under torch's shared one had
// broken iostream locale facets: `>> std::hex` refused a valid hwloc pci_type and formatting the
// error crashed. Here a global locale whose number facets refuse every number and whose
// punctuation groups digits ("1.234") and uses ',' as decimal point stands in for that process.
#include <gtest/gtest.h>

#include <locale>
#include <string>

#include "test_data.h"
#include "topo/error.h"
#include "topo/loader.h"
#include "topo/nccl_xml.h"
#include "topo/topology_json.h"

namespace torch_topo::topo {
namespace {

class GroupingPunct : public std::numpunct<char> {
 protected:
  char do_decimal_point() const override { return ','; }
  char do_thousands_sep() const override { return '.'; }
  std::string do_grouping() const override { return "\3"; }
};

/// Extraction of any number fails, as `is >> std::hex >> value` did on the H200 host.
class RefusingNumGet : public std::num_get<char> {
 protected:
#define TORCH_TOPO_REFUSE(T)                                                                  \
  iter_type do_get(iter_type in, iter_type, std::ios_base&, std::ios_base::iostate& err, T&) \
      const override {                                                                        \
    err = std::ios_base::failbit;                                                             \
    return in;                                                                                \
  }
  TORCH_TOPO_REFUSE(bool)
  TORCH_TOPO_REFUSE(long)
  TORCH_TOPO_REFUSE(long long)
  TORCH_TOPO_REFUSE(unsigned short)
  TORCH_TOPO_REFUSE(unsigned int)
  TORCH_TOPO_REFUSE(unsigned long)
  TORCH_TOPO_REFUSE(unsigned long long)
  TORCH_TOPO_REFUSE(float)
  TORCH_TOPO_REFUSE(double)
  TORCH_TOPO_REFUSE(long double)
  TORCH_TOPO_REFUSE(void*)
#undef TORCH_TOPO_REFUSE
};

/// Installs the hostile locale as the global one for the scope; gtest's own output is written
/// after the scope ends.
class HostileLocale {
 public:
  HostileLocale()
      : previous_(std::locale::global(std::locale(
            std::locale(std::locale::classic(), new GroupingPunct), new RefusingNumGet))) {}
  ~HostileLocale() { std::locale::global(previous_); }
  HostileLocale(const HostileLocale&) = delete;
  HostileLocale& operator=(const HostileLocale&) = delete;

 private:
  std::locale previous_;
};

/// What reading a file gives, as text: its torch-topo JSON and NCCL XML, or the error message.
std::string outcome(const std::string& path) {
  std::string out;
  try {
    HostTopology host = loadTopologyFile(path);
    out = hostToJson(host);
    out += writeNcclXml(host);
  } catch (const Error& e) {
    out += std::string("error: ") + e.what();
  }
  return out;
}

TEST(ReaderLocaleTest, HostileLocaleLeavesEveryDataFileUnchanged) {
  int files = 0;
  for (const char* dir : {"nvidia_smi_topo", "nccl_topo_xml", "hwloc"}) {
    for (const std::string& path : testing::dataFiles(dir)) {
      const std::string expected = outcome(path);
      std::string got;
      {
        HostileLocale hostile;
        got = outcome(path);
      }
      EXPECT_EQ(got, expected) << path;
      ++files;
    }
  }
  EXPECT_GE(files, 30);
}

TEST(ReaderLocaleTest, H200PciTypesParseUnderHostileLocale) {
  // The file on which the live probe crashed: its virtio devices carry pci_type
  // "0180 [1af4:1042] [1af4:1042] 01".
  const std::string path = testing::dataPath("hwloc/hwloc_h200_1xGPU_firecracker-vm_lstopo2.9.xml");
  HostileLocale hostile;
  HostTopology host = loadTopologyFile(path);
  ASSERT_EQ(host.gpus.size(), 1u);
  EXPECT_EQ(host.gpus[0].bus_id, "0000:00:06.0");
}

TEST(ReaderLocaleTest, MessagesKeepPlainNumbersUnderHostileLocale) {
  HostileLocale hostile;
  EXPECT_STREQ(ParseError("f.txt", 1234, 5678, "bad").what(), "f.txt:1234:5678: bad");
  try {
    TOPO_CHECK(false, "n: got ", 64000000, " and ", 1234567.0, ", expected ", size_t{1} << 40);
    ADD_FAILURE() << "TOPO_CHECK did not throw";
  } catch (const InvalidArgument& e) {
    std::string what = e.what();
    EXPECT_EQ(what.substr(0, what.find(" [")),
              "n: got 64000000 and 1.23457e+06, expected 1099511627776");
  }
  // A reader's error past line 999 names the line without grouping.
  std::string text(1200, '\n');
  text += "GPU0\tGPU1\nGPU0\t X \tQQQ\n";
  try {
    loadTopologyText(text, "smi.txt");
    ADD_FAILURE() << "the bad cell was accepted";
  } catch (const ParseError& e) {
    EXPECT_EQ(e.line(), 1202);
    EXPECT_EQ(std::string(e.what()).rfind("smi.txt:1202:", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace torch_topo::topo
