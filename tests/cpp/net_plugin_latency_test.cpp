// SPDX-License-Identifier: Apache-2.0
// Tests of csrc/topo/net_plugin_latency and its place in the live probe: EFA NICs found in a built
// sysfs tree get the latency aws-ofi-nccl reports to NCCL (its OFI_NCCL_NET_LATENCY, else its
// platform table for the instance type, else 75 us); other NICs keep 0.
#include "topo/net_plugin_latency.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "fake_apis.h"
#include "topo/error.h"
#include "topo/probe.h"
#include "topo/sysfs_probe.h"

namespace torch_topo::topo {
namespace {

using testing::SysfsTree;

// aws-ofi-nccl 2daf7d3, src/platform-aws.cpp: platform_data_map in its order (first match wins;
// an entry with a regex is searched, one without is compared whole), and the 75 us set in
// PlatformAWS::init when no entry matches. Matched here with std::regex, not the POSIX regex of
// the code under test.
struct Entry {
  std::string exact, pattern;
  double us;
};
const std::vector<Entry> kPluginTable = {
    {"p4d.24xlarge", "", 75},         {"p4de.24xlarge", "", 75},
    {"p3dn.24xlarge", "", 150},       {"p5.4xlarge", "", 75},
    {"", "^p5(e?\\..*)", 75},         {"", "^(p5en|p6-b200).*", 35},
    {"", "^p6-b300.*", 35},           {"", "^p([5-9]|[0-9]{2,}).*", 35},
    {"g5.48xlarge", "", 75},          {"g7e.8xlarge", "", 35},
    {"", "^g7e\\.(12|24|48)xlarge", 35}, {"", "^trn.*", 75},
    {"", "^inf.*", 75},
};
constexpr double kPluginDefaultUs = 75;

double pluginTableUs(const std::string& product) {
  for (const Entry& e : kPluginTable) {
    bool hit = e.pattern.empty() ? product == e.exact
                                 : std::regex_search(product, std::regex(e.pattern,
                                                                         std::regex::extended));
    if (hit) return e.us;
  }
  return kPluginDefaultUs;
}

std::string errorOf(const std::function<void()>& call) {
  try {
    call();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

// Sets (or, with nullopt, unsets) an environment variable for the test's lifetime.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    if (value) {
      setenv(name, value->c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(NetPluginLatencyTest, InstanceTypesTakeThePluginTablesFirstMatchElse75) {
  // The figures the plugin's table gives, stated as facts...
  EXPECT_EQ(awsOfiNcclLatencyUs(nullptr, "p5.48xlarge"), 75.0);
  EXPECT_EQ(awsOfiNcclLatencyUs(nullptr, "p5en.48xlarge"), 35.0);
  EXPECT_EQ(awsOfiNcclLatencyUs(nullptr, "p6-b200.48xlarge"), 35.0);
  EXPECT_EQ(awsOfiNcclLatencyUs(nullptr, "p3dn.24xlarge"), 150.0);
  EXPECT_EQ(awsOfiNcclLatencyUs(nullptr, "m7i.48xlarge"), 75.0);
  // ...and every entry, including order (p5 and p5e ahead of the later families' 35 us), exact
  // names against prefixes of them, and unreadable product names ("").
  for (const std::string product :
       {"p4d.24xlarge", "p4de.24xlarge", "p4d.24xlarge ", "p3dn.24xlargex", "p5.4xlarge",
        "p5e.48xlarge", "p5.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge", "p6-b300.48xlarge",
        "p6e-gb200.36xlarge", "p7.48xlarge", "p10.48xlarge", "p4.48xlarge", "g5.48xlarge",
        "g5.12xlarge", "g7e.8xlarge", "g7e.2xlarge", "g7e.24xlarge", "g7e.48xlarge",
        "trn1.32xlarge", "trn2.48xlarge", "inf2.48xlarge", "c5n.18xlarge", "hpc7g.16xlarge",
        "", "P5.48xlarge"}) {
    EXPECT_EQ(awsOfiNcclLatencyUs(nullptr, product), pluginTableUs(product)) << product;
  }
  EXPECT_EQ(pluginTableUs("p6e-gb200.36xlarge"), 35.0);  // the reference does reach the 35s
  EXPECT_EQ(pluginTableUs("g7e.2xlarge"), 75.0);
}

TEST(NetPluginLatencyTest, EnvironmentOverridesTheTableAsThePluginParsesIt) {
  const std::vector<std::pair<const char*, double>> good = {
      {"20", 20}, {"  20", 20}, {"+20", 20}, {"2e1", 20}, {"20.5", 20.5}, {"0", 0}, {".5", 0.5}};
  for (const auto& [text, us] : good) {
    EXPECT_EQ(awsOfiNcclLatencyUs(text, "p3dn.24xlarge"), us) << "'" << text << "'";
  }
  // Text the plugin's istringstream cannot read whole (the plugin then fails to start), and
  // numbers no network reports.
  for (const char* bad : {"abc", "20us", "20 ", "", "0x14", "+-20", "++20", "nan", "inf", "-5",
                          "1e7"}) {
    std::string what = errorOf([&] { awsOfiNcclLatencyUs(bad, "p5.48xlarge"); });
    EXPECT_NE(what.find("OFI_NCCL_NET_LATENCY: got '" + std::string(bad) + "'"),
              std::string::npos)
        << "'" << bad << "': " << what;
  }
}

// A p-series host as sysfs shows it: two EFAs (one known by its vendor, the other by its driver
// only), an mlx5 HCA, and the ENA interface (Amazon's vendor id too, but no RDMA device).
class EfaHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string efa0 = sys_.pciFunction("0000:10:00.0", "0");
    sys_.write(efa0 + "/vendor", "0x1d0f\n");
    sys_.rdma("rdmap16s0", efa0, "100 Gb/sec (4X EDR)");
    std::string efa1 = sys_.pciFunction("0000:20:00.0", "1");
    sys_.link(efa1 + "/driver", "bus/pci/drivers/efa");
    sys_.rdma("rdmap32s0", efa1, "100 Gb/sec (4X EDR)");
    std::string cx7 = sys_.pciFunction("0000:30:00.0", "1");
    sys_.write(cx7 + "/vendor", "0x15b3\n");
    sys_.link(cx7 + "/driver", "bus/pci/drivers/mlx5_core");
    sys_.netdev("ens30np0", cx7, "400000");
    sys_.rdma("mlx5_0", cx7, "400 Gb/sec (4X NDR)");
    std::string ena = sys_.pciFunction("0000:00:05.0", "0");
    sys_.write(ena + "/vendor", "0x1d0f\n");
    sys_.link(ena + "/driver", "bus/pci/drivers/ena");
    sys_.netdev("ens5", ena, "100000");
  }
  void setProduct(const std::string& name) {
    sys_.write("devices/virtual/dmi/id/product_name", name + "\n");
  }
  // latency_us by NIC name after the sysfs read and the plugin's latencies.
  std::map<std::string, double> latencies() {
    std::vector<Nic> nics = readSysfsNics(sys_.root());
    setEfaNicLatencies(sys_.root(), &nics);
    std::map<std::string, double> out;
    for (const Nic& nic : nics) out[nic.name] = nic.latency_us;
    return out;
  }
  void expectEfa(double us, const std::string& context) {
    std::map<std::string, double> got = latencies();
    ASSERT_EQ(got.size(), 4u) << context;
    EXPECT_EQ(got["rdmap16s0"], us) << context;
    EXPECT_EQ(got["rdmap32s0"], us) << context;
    EXPECT_EQ(got["mlx5_0"], 0.0) << context;
    EXPECT_EQ(got["ens5"], 0.0) << context;
  }

  SysfsTree sys_;
  ScopedEnv no_latency_{"OFI_NCCL_NET_LATENCY", std::nullopt};
  ScopedEnv no_forced_product_{"OFI_NCCL_FORCE_PRODUCT_NAME", std::nullopt};
};

TEST_F(EfaHostTest, EfaNicsTakeTheInstanceTypesLatencyOthersKeepZero) {
  EXPECT_TRUE(isSysfsEfaDevice(sys_.root(), "rdmap16s0"));
  EXPECT_TRUE(isSysfsEfaDevice(sys_.root(), "rdmap32s0"));
  EXPECT_FALSE(isSysfsEfaDevice(sys_.root(), "mlx5_0"));
  EXPECT_FALSE(isSysfsEfaDevice(sys_.root(), "ens5"));
  expectEfa(kPluginDefaultUs, "no product_name file");
  for (const std::string product :
       {"p5.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge", "p3dn.24xlarge", "x2idn.32xlarge"}) {
    setProduct(product);
    EXPECT_EQ(readSysfsProductName(sys_.root()), product);
    expectEfa(pluginTableUs(product), product);
  }
  {
    // The plugin's own override of the product name wins over DMI's.
    ScopedEnv forced("OFI_NCCL_FORCE_PRODUCT_NAME", "p5en.48xlarge");
    expectEfa(pluginTableUs("p5en.48xlarge"), "forced p5en over DMI's x2idn");
  }
  {
    ScopedEnv env("OFI_NCCL_NET_LATENCY", "20");
    expectEfa(20.0, "OFI_NCCL_NET_LATENCY=20");
  }
}

TEST_F(EfaHostTest, BadEnvironmentLeavesTheNicsAndTheProbeNamesIt) {
  setProduct("p5en.48xlarge");
  ScopedEnv env("OFI_NCCL_NET_LATENCY", "fast");
  std::vector<Nic> nics = readSysfsNics(sys_.root());
  std::string what = errorOf([&] { setEfaNicLatencies(sys_.root(), &nics); });
  EXPECT_NE(what.find("OFI_NCCL_NET_LATENCY: got 'fast'"), std::string::npos) << what;
  for (const Nic& nic : nics) EXPECT_EQ(nic.latency_us, 0.0) << nic.name;

  HostTopology host = probeHost(nullptr, nullptr, sys_.root());
  EXPECT_EQ(host.nics.size(), 4u);
  int named = 0;
  for (const std::string& w : host.warnings) {
    named += w.rfind("probe:aws-ofi-nccl failed: OFI_NCCL_NET_LATENCY: got 'fast'", 0) == 0;
  }
  EXPECT_EQ(named, 1);
  for (const Nic& nic : host.nics) EXPECT_EQ(nic.latency_us, 0.0) << nic.name;
}

TEST_F(EfaHostTest, LiveProbeCarriesTheLatency) {
  setProduct("p5en.48xlarge");
  HostTopology host = probeHost(nullptr, nullptr, sys_.root());
  ASSERT_EQ(host.nics.size(), 4u);
  for (const Nic& nic : host.nics) {
    bool efa = nic.name.rfind("rdmap", 0) == 0;
    EXPECT_EQ(nic.latency_us, efa ? pluginTableUs("p5en.48xlarge") : 0.0) << nic.name;
  }
  for (const std::string& w : host.warnings) {
    EXPECT_EQ(w.find("aws-ofi-nccl"), std::string::npos) << w;
  }
}

TEST(NetPluginLatencyTest, HostsWithoutEfaIgnoreTheSettings) {
  SysfsTree sys;
  std::string cx7 = sys.pciFunction("0000:3b:00.0", "1");
  sys.write(cx7 + "/vendor", "0x15b3\n");
  sys.netdev("ens1np0", cx7, "400000");
  sys.rdma("mlx5_0", cx7, "400 Gb/sec (4X NDR)");
  sys.write("devices/virtual/dmi/id/product_name", "p5.48xlarge\n");
  ScopedEnv env("OFI_NCCL_NET_LATENCY", "garbage");
  std::vector<Nic> nics = readSysfsNics(sys.root());
  setEfaNicLatencies(sys.root(), &nics);  // no throw: the plugin is not in play
  ASSERT_EQ(nics.size(), 1u);
  EXPECT_EQ(nics[0].latency_us, 0.0);
}

}  // namespace
}  // namespace torch_topo::topo
