# SPDX-License-Identifier: Apache-2.0
"""Link parameters of the emulated cluster: parsing `--inter-bw` / `--inter-delay` and the `tc`
commands that enforce the rate on a veth end (the delay is added by relay.py)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from torch_topo.config import MAX_LINK_LATENCY_US, MIN_LINK_GBPS, MIN_LINK_LATENCY_US

__all__ = ["LinkSpec", "parse_rate_bps", "parse_delay_us", "tbf_command"]

# tc's own unit words (tc-tbf(8), "RATES"): "bit" units are bits/s, "bps" units are bytes/s.
_RATE_UNITS = {
    "bit": 1.0, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12,
    "bps": 8.0, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9, "tbps": 8e12,
}
# ns and ps as well: the smallest delay taken, 1 ps, was writable only as 0.000001us.
_DELAY_UNITS = {"ps": 1e-6, "ns": 1e-3, "nsec": 1e-3, "us": 1.0, "usec": 1.0, "ms": 1e3,
                "msec": 1e3, "s": 1e6, "sec": 1e6}
_NUMBER_UNIT = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*$")

# tbf needs a bucket at least one GSO frame deep (64 KiB) or it splits every frame. The uplink
# (right under TCP) gets 2 frames; the downlink, fed by the userspace relay, gets 8 so that it
# can catch up after the relay was briefly descheduled instead of losing that link time
# (measured on a loaded 2-core machine, 128 MiB over TCP: 2 frames on both ends gave 815
# Mbit/s, this 860-900).
_UPLINK_BURST_BYTES = 2 * 65536
_DOWNLINK_BURST_BYTES = 8 * 65536
# tc reads the burst as a 32-bit byte count, which burst_bytes' 1 ms of line rate must fit
# (above, tc printed its usage, naming no option). tc takes rates down to one byte/s, but the
# ranks' files carry the rate as the cluster's inter-host bandwidth, which torch-topo JSON
# refuses below MIN_LINK_GBPS (1e-6 GB/s = 8 kbit/s): every rank failed on it.
_MIN_RATE_BPS = MIN_LINK_GBPS * 8e9
_MAX_RATE_BPS = float((2**32 - 1) * 8 * 1000)
# Queue room of the shaper: enough for TCP to keep the link busy over the emulated RTT while
# its small-queue limit keeps the standing queue short.
_QUEUE_LATENCY_MS = 50


def parse_rate_bps(text: str, option: str = "--inter-bw") -> float:
    """Rate in bits/s from tc syntax ("1gbit", "100mbit", "125mbps")."""
    match = _NUMBER_UNIT.match(text)
    unit = match.group(2).lower() if match else ""
    if not match or unit not in _RATE_UNITS or float(match.group(1)) <= 0:
        raise ValueError(
            f"{option}: got {text!r}, expected a positive rate with a tc unit "
            f"({', '.join(_RATE_UNITS)}), e.g. 1gbit"
        )
    rate = float(match.group(1)) * _RATE_UNITS[unit]
    if not _MIN_RATE_BPS <= rate <= _MAX_RATE_BPS:
        raise ValueError(f"{option}: got {text!r}, expected 8kbit (the slowest link "
                         f"torch-topo prices) to {math.floor(_MAX_RATE_BPS / 1e10) / 100}tbit "
                         "(the fastest tc can shape)")
    return rate


def parse_delay_us(text: str, option: str = "--inter-delay") -> float:
    """One-way delay in microseconds from "1ms", "500us", "0"."""
    match = _NUMBER_UNIT.match(text)
    unit = (match.group(2).lower() or "us") if match else ""
    if not match or unit not in _DELAY_UNITS:
        raise ValueError(
            f"{option}: got {text!r}, expected a delay such as 1ms or 500us "
            f"(units {', '.join(_DELAY_UNITS)})"
        )
    delay = float(match.group(1)) * _DELAY_UNITS[unit]
    # The ranks are told the delay as TORCH_TOPO_INTER_HOST_LATENCY_US, which refuses more.
    if delay > MAX_LINK_LATENCY_US:
        raise ValueError(f"{option}: got {text!r}, expected at most 1s (the largest latency "
                         "torch-topo's cost model takes)")
    if 0 < delay < MIN_LINK_LATENCY_US:  # 0 leaves the variable unset; this broke every rank
        raise ValueError(f"{option}: got {text!r}, expected 0 or at least 1ps (the smallest "
                         "latency torch-topo's cost model takes)")
    return delay


@dataclass(frozen=True, kw_only=True, slots=True)
class LinkSpec:
    """One node's link to the switch, the same in both directions."""

    rate_bps: float
    """Line rate in bits/s per direction."""

    delay_us: float
    """One-way node-to-node delay in microseconds (added once, at the switch)."""

    @classmethod
    def parse(cls, rate: str, delay: str) -> LinkSpec:
        """From the emulator's --inter-bw and --inter-delay texts; ValueError names the option."""
        return cls(rate_bps=parse_rate_bps(rate), delay_us=parse_delay_us(delay))

    def burst_bytes(self, downlink: bool) -> int:
        # At least 1 ms of line rate so the bucket refills between timer ticks.
        floor = _DOWNLINK_BURST_BYTES if downlink else _UPLINK_BURST_BYTES
        return max(floor, int(self.rate_bps / 8 / 1000))


def tbf_command(ifname: str, link: LinkSpec, downlink: bool) -> list[str]:
    """`tc` arguments that cap egress of `ifname` at the link rate; `downlink` is the switch
    port's end (switch -> node)."""
    return [
        "tc", "qdisc", "replace", "dev", ifname, "root", "tbf",
        "rate", f"{int(link.rate_bps)}bit",
        "burst", str(link.burst_bytes(downlink)),
        "latency", f"{_QUEUE_LATENCY_MS}ms",
    ]
