# SPDX-License-Identifier: Apache-2.0
"""Measures an emulated link with plain TCP sockets: round-trip time of 1-byte messages and the
throughput of a bulk transfer from rank 1 to rank 0. Run it as the command of a 2-node,
1-process-per-node emulation (it is a plain script, no torch import):

    python -m torch_topo.emulate --nodes 2 --procs-per-node 1 -- \\
        python torch_topo/emulation/linkcheck.py --mbytes 32

Rank 0 prints one JSON line: {"rtt_ms": ..., "throughput_mbit_s": ..., "seconds": ...}.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time

_PINGS = 50
_CHUNK_BYTES = 1 << 20


def _recv_exact(sock: socket.socket, n: int) -> None:
    while n:
        got = sock.recv(min(n, _CHUNK_BYTES))
        if not got:
            raise ConnectionError("linkcheck: peer closed the connection early")
        n -= len(got)


def _serve(port: int, nbytes: int) -> dict:
    with socket.create_server(("0.0.0.0", port)) as server:
        conn, _ = server.accept()
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            rtts = []
            for _ in range(_PINGS):
                t0 = time.perf_counter()
                conn.sendall(b"p")
                _recv_exact(conn, 1)
                rtts.append(time.perf_counter() - t0)
            conn.sendall(b"g")  # go: the bulk transfer starts now
            t0 = time.perf_counter()
            _recv_exact(conn, nbytes)
            seconds = time.perf_counter() - t0
            conn.sendall(b"d")
    rtts.sort()
    return {"rtt_ms": rtts[len(rtts) // 2] * 1e3, "bytes": nbytes, "seconds": seconds,
            "throughput_mbit_s": nbytes * 8 / seconds / 1e6}


def _send(host: str, port: int, nbytes: int) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            sock = socket.create_connection((host, port), timeout=30)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    with sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(_PINGS):
            _recv_exact(sock, 1)
            sock.sendall(b"p")
        _recv_exact(sock, 1)
        block = bytes(_CHUNK_BYTES)
        left = nbytes
        while left:
            n = min(left, _CHUNK_BYTES)
            sock.sendall(block[:n])
            left -= n
        _recv_exact(sock, 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="TCP round trip and throughput of a link")
    parser.add_argument("--mbytes", type=float, default=32.0)
    parser.add_argument("--port", type=int, default=29600)
    args = parser.parse_args(argv)
    nbytes = int(args.mbytes * (1 << 20))
    rank = int(os.environ["RANK"])
    if rank == 0:
        print(json.dumps(_serve(args.port, nbytes)), flush=True)
    elif rank == 1:
        _send(os.environ["MASTER_ADDR"], args.port, nbytes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
