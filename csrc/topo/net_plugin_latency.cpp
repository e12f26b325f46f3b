// SPDX-License-Identifier: Apache-2.0
// aws-ofi-nccl's reported EFA latency (layer: csrc/topo). Facts from github.com/aws/aws-ofi-nccl
// at 2daf7d3 (Aug 2026): the platform table of src/platform-aws.cpp, its default and the order
// of the two overrides (PlatformAWS::init); the product name of src/nccl_ofi_system.cpp
// (nccl_net_ofi_get_product_name); the parsing of include/nccl_ofi_param_impl.h.
#include "topo/net_plugin_latency.h"

#include <regex.h>
#include <stdlib.h>

#include <string_view>

#include "topo/error.h"
#include "topo/sysfs_probe.h"
#include "topo/text_numbers.h"

namespace torch_topo::topo {
namespace {

// One entry of the plugin's table: an instance type matched whole, or a POSIX extended regex
// searched in it.
struct PlatformLatency {
  const char* exact;
  const char* pattern;
  double us;
};

// In the plugin's order: the first match decides, so the 75 us p5 and p5e entries must stay
// ahead of the 35 us entry for every p5 and later family.
constexpr PlatformLatency kPlatforms[] = {
    {"p4d.24xlarge", nullptr, 75.0},
    {"p4de.24xlarge", nullptr, 75.0},
    {"p3dn.24xlarge", nullptr, 150.0},
    {"p5.4xlarge", nullptr, 75.0},
    {nullptr, "^p5(e?\\..*)", 75.0},
    {nullptr, "^(p5en|p6-b200).*", 35.0},
    {nullptr, "^p6-b300.*", 35.0},
    {nullptr, "^p([5-9]|[0-9]{2,}).*", 35.0},
    {"g5.48xlarge", nullptr, 75.0},
    {"g7e.8xlarge", nullptr, 35.0},
    {nullptr, "^g7e\\.(12|24|48)xlarge", 35.0},
    {nullptr, "^trn.*", 75.0},
    {nullptr, "^inf.*", 75.0},
};
// Unlisted instance types, and hosts whose product name cannot be read. The table and this default
// are those of the plugin's AWS platform, which it builds on EC2 unless told otherwise and picks
// on any host with EFA or ENA devices.
constexpr double kDefaultUs = 75.0;
// Beyond a second no plugin reports a real network; NCCL XML's <net latency> has the same bound.
constexpr double kMaxUs = 1e6;

bool searchPattern(const char* pattern, const std::string& text) {
  regex_t regex;
  TOPO_CHECK(regcomp(&regex, pattern, REG_EXTENDED | REG_NOSUB) == 0,
             "aws-ofi-nccl platform pattern '", pattern, "' does not compile");
  bool found = regexec(&regex, text.c_str(), 0, nullptr, 0) == 0;
  regfree(&regex);
  return found;
}

// The plugin reads its float parameters with an istringstream: leading blanks and a '+' pass,
// any text after the number fails.
double parseEnvLatency(std::string_view text) {
  std::string_view number = text;
  size_t start = number.find_first_not_of(" \t\n\v\f\r");
  number.remove_prefix(start == std::string_view::npos ? number.size() : start);
  if (number.size() > 1 && number[0] == '+' && number[1] != '-') number.remove_prefix(1);
  ParsedNumber<double> us = parseDouble(number);
  if (!us || us.value < 0 || us.value > kMaxUs) {
    throw InvalidArgument("OFI_NCCL_NET_LATENCY: got '" + std::string(text) +
                          "', expected the EFA latency in us, a number in [0, 1e6]" +
                          (us ? "" : " (aws-ofi-nccl fails to start on text it cannot read)"));
  }
  return us.value;
}

}  // namespace

double awsOfiNcclLatencyUs(const char* env_latency, const std::string& product_name) {
  if (env_latency) return parseEnvLatency(env_latency);
  for (const PlatformLatency& entry : kPlatforms) {
    bool match =
        entry.exact ? product_name == entry.exact : searchPattern(entry.pattern, product_name);
    if (match) return entry.us;
  }
  return kDefaultUs;
}

void setEfaNicLatencies(const std::string& sysfs_root, std::vector<Nic>* nics) {
  std::vector<Nic*> efa;
  for (Nic& nic : *nics) {
    if (isSysfsEfaDevice(sysfs_root, nic.name)) efa.push_back(&nic);
  }
  if (efa.empty()) return;  // no EFA: aws-ofi-nccl and its settings are not in play
  const char* forced = getenv("OFI_NCCL_FORCE_PRODUCT_NAME");
  double us = awsOfiNcclLatencyUs(getenv("OFI_NCCL_NET_LATENCY"),
                                  forced ? forced : readSysfsProductName(sysfs_root));
  for (Nic* nic : efa) nic->latency_us = us;
}

}  // namespace torch_topo::topo
