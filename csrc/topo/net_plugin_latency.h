// SPDX-License-Identifier: Apache-2.0
// The latency a NIC's NCCL net plugin reports (NCCL's latencyInter, Nic::latency_us) where the
// live probe can know it: aws-ofi-nccl, the only way NCCL drives AWS EFA (layer: csrc/topo).
#pragma once

#include <string>
#include <vector>

#include "topo/graph.h"

namespace torch_topo::topo {

/// The latency (us) aws-ofi-nccl reports to NCCL for each EFA NIC:
///   - `env_latency`, the text of OFI_NCCL_NET_LATENCY, when not null, read as the plugin reads
///     it (a decimal float; leading blanks and one '+' allowed, nothing after it). Throws
///     InvalidArgument naming the variable when it is not a number in [0, 1e6]; the plugin
///     refuses to start on text it cannot read.
///   - else the latency of the first entry of the plugin's platform table that matches
///     `product_name` (the EC2 instance type);
///   - else 75, the plugin's default for instance types it does not list.
double awsOfiNcclLatencyUs(const char* env_latency, const std::string& product_name);

/// Sets latency_us of the EFA NICs of `nics` (isSysfsEfaDevice under `sysfs_root`) to
/// awsOfiNcclLatencyUs of this process's OFI_NCCL_NET_LATENCY and the product name the plugin
/// uses: OFI_NCCL_FORCE_PRODUCT_NAME when set, else readSysfsProductName(sysfs_root). Other NICs
/// keep theirs (NCCL's own IB and socket transports report 0). Throws InvalidArgument, with
/// `nics` unchanged, for a bad OFI_NCCL_NET_LATENCY when there is an EFA NIC.
void setEfaNicLatencies(const std::string& sysfs_root, std::vector<Nic>* nics);

}  // namespace torch_topo::topo
