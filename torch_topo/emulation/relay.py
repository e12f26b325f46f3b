# SPDX-License-Identifier: Apache-2.0
"""The emulated switch: a userspace Ethernet relay that adds the one-way inter-node delay.

Runs inside the switch namespace as a plain script (no torch import, so it starts in
milliseconds). Kernels without `sch_netem` (this project's CI kernel has tbf and htb only) have
no qdisc that delays packets, so the delay lives here; the rate limits stay in the kernel (tbf on
both ends of every node link, see shaping.py), which also gives TCP its usual back-pressure.
Frames keep their virtio-net header (PACKET_VNET_HDR), so 64 KiB GSO frames and partial
checksums pass through untouched and the relay handles a few thousand frames per second at
1 Gbit/s rather than ~80,000 MTU-sized ones.
"""

from __future__ import annotations

import argparse
import collections
import os
import select
import signal
import socket
import sys
import time

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_VNET_HDR = 15
PACKET_IGNORE_OUTGOING = 23
SO_SNDBUFFORCE = 32  # <asm-generic/socket.h>; Python's socket module lacks them
SO_RCVBUFFORCE = 33
VNET_HDR_BYTES = 10  # struct virtio_net_hdr without num_buffers
FRAME_BUFFER_BYTES = 65536 + 256
SOCKET_BUFFER_BYTES = 64 << 20  # a few RTTs of 1 Gbit/s traffic with room for bursts
DRAIN_FRAMES = 64  # per port and wake-up, so a busy port cannot starve due departures
BROADCAST_BIT = 0x01  # lowest bit of the first destination MAC byte: multicast/broadcast


def open_port(ifname: str) -> socket.socket:
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)
    # Without this the relay would read back every frame it sends out of the same port.
    sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
    sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, SOCKET_BUFFER_BYTES)
    sock.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, SOCKET_BUFFER_BYTES)
    sock.bind((ifname, 0))
    sock.setblocking(False)
    return sock


def parse_port(text: str) -> tuple[str, bytes]:
    name, sep, mac = text.partition("=")
    parts = mac.split(":")
    if not sep or len(parts) != 6:
        raise ValueError(f"--port: got {text!r}, expected IFNAME=aa:bb:cc:dd:ee:ff")
    return name, bytes(int(p, 16) for p in parts)


def run_relay(ports: list[tuple[str, bytes]], delay_s: float) -> None:
    socks = [open_port(name) for name, _ in ports]
    by_mac = {mac: sock for (_, mac), sock in zip(ports, socks, strict=True)}
    # One FIFO suffices: every frame waits the same delay, so due times are already sorted.
    pending: collections.deque[tuple[float, socket.socket, bytes]] = collections.deque()
    print("relay ready", flush=True)
    while True:
        # select() takes a float timeout (microseconds); poll/epoll round to milliseconds,
        # which would add up to 1 ms to every hop.
        timeout = max(0.0, pending[0][0] - time.monotonic()) if pending else 1.0
        readable, _, _ = select.select(socks, [], [], timeout)
        for src in readable:
            for _ in range(DRAIN_FRAMES):
                try:
                    frame = src.recv(FRAME_BUFFER_BYTES)
                except BlockingIOError:
                    break
                due = time.monotonic() + delay_s
                dst_mac = frame[VNET_HDR_BYTES:VNET_HDR_BYTES + 6]
                if dst_mac[0] & BROADCAST_BIT:
                    pending.extend((due, s, frame) for s in socks if s is not src)
                elif dst_mac in by_mac and by_mac[dst_mac] is not src:
                    pending.append((due, by_mac[dst_mac], frame))
        now = time.monotonic()
        while pending and pending[0][0] <= now:
            _, dst, frame = pending.popleft()
            try:
                dst.send(frame)
            except (BlockingIOError, OSError):
                pass  # a full downlink queue drops the frame, as a switch port would


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--delay-us", type=float, required=True)
    parser.add_argument("--port", action="append", required=True, help="IFNAME=MAC of the node")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        # The relay stands in for switch hardware: on a busy machine it must not queue behind
        # the ranks, or scheduling delays would add to the emulated latency.
        os.nice(-10)
    except OSError:
        pass
    run_relay([parse_port(p) for p in args.port], args.delay_us * 1e-6)
    return 0


if __name__ == "__main__":
    sys.exit(main())
