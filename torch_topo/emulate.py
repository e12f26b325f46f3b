# SPDX-License-Identifier: Apache-2.0
"""`python -m torch_topo.emulate`: run a command as the ranks of an emulated multi-node cluster.

    python -m torch_topo.emulate --nodes 2 --procs-per-node 4 --inter-bw 1gbit \\
        --inter-delay 1ms --placement contiguous -- python train.py

One network namespace and host name per node, loopback inside a node, rate-limited and delayed
links between nodes (docs/emulator.md). Exit code: the first failing rank's code, 124 when
ranks had to be killed, 2 for usage errors or when the emulator cannot run here (not root,
namespaces unavailable), 128 + N when the emulator itself got signal N.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile

from torch_topo.emulation import cluster_file, netns
from torch_topo.emulation.launcher import RankProcesses, die_with_parent, place_ranks
from torch_topo.emulation.shaping import LinkSpec, parse_delay_us, parse_rate_bps

__all__ = ["main", "build_parser"]

_MAX_NODES = 250  # one /24 of node addresses
_RELAY_START_S = 20.0
_RELAY_SCRIPT = os.path.join(os.path.dirname(__file__), "emulation", "relay.py")


class _Interrupted(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m torch_topo.emulate",
        description="Run COMMAND as the ranks of an emulated N-node cluster.",
    )
    parser.add_argument("--nodes", type=int, required=True, help="number of emulated hosts")
    parser.add_argument("--procs-per-node", type=int, required=True, help="ranks per host")
    parser.add_argument("--inter-bw", default="1gbit",
                        help="inter-node line rate per direction, tc units (default 1gbit)")
    parser.add_argument("--inter-delay", default="1ms",
                        help="one-way node-to-node delay (default 1ms)")
    parser.add_argument("--placement", choices=("contiguous", "interleaved"),
                        default="contiguous",
                        help="contiguous: node-major ranks; interleaved: rank i on node i mod N")
    parser.add_argument("--topology", metavar="FILE", default=None,
                        help="host topology file every node plays (named in TORCH_TOPO_FILE)")
    parser.add_argument("--master-port", type=int, default=29500)
    parser.add_argument("--grace-s", type=float, default=30.0,
                        help="seconds the other ranks may run on after one exits (default 30)")
    parser.add_argument("--timeout-s", type=float, default=None,
                        help="kill the whole run after this many seconds")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    return parser


def _validate(args: argparse.Namespace) -> tuple[LinkSpec, list[str]]:
    if not 1 <= args.nodes <= _MAX_NODES:
        raise ValueError(f"--nodes: got {args.nodes}, expected 1..{_MAX_NODES}")
    if args.procs_per_node < 1:
        raise ValueError(f"--procs-per-node: got {args.procs_per_node}, expected >= 1")
    if not 1 <= args.master_port <= 65535:
        raise ValueError(f"--master-port: got {args.master_port}, expected 1..65535")
    if args.grace_s < 0 or (args.timeout_s is not None and args.timeout_s <= 0):
        raise ValueError("--grace-s must be >= 0 and --timeout-s > 0")
    if args.topology is not None and not os.path.isfile(args.topology):
        raise ValueError(f"--topology: {args.topology!r} is not a file")
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise ValueError("no COMMAND given; usage: python -m torch_topo.emulate ... -- COMMAND")
    link = LinkSpec(rate_bps=parse_rate_bps(args.inter_bw),
                    delay_us=parse_delay_us(args.inter_delay))
    return link, command


def _start_relay(net: netns.ClusterNetwork) -> subprocess.Popen:
    cmd = ["ip", "netns", "exec", net.switch_ns, sys.executable, _RELAY_SCRIPT,
           "--delay-us", str(net.link.delay_us)]
    for port in net.relay_ports():
        cmd += ["--port", port]
    relay = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, start_new_session=True,
                             preexec_fn=die_with_parent)
    # The first line is "relay ready" once every port socket is bound.
    ready = relay.stdout.readline().strip() if relay.stdout else ""
    if ready != "relay ready":
        relay.kill()
        raise netns.EmulationUnavailable(f"torch_topo.emulate: switch relay did not start "
                                         f"(exit {relay.wait()})")
    return relay


def _write_topology_files(workdir: str, net: netns.ClusterNetwork, ranks,
                          base: dict) -> list[str]:
    """Writes node<i>.json per node and cluster.json; returns the host file paths."""
    hosts = [cluster_file.node_host(base, net, i) for i in range(net.nodes)]
    paths = []
    for i, host in enumerate(hosts):
        paths.append(os.path.join(workdir, f"node{i}.json"))
        cluster_file.write_json(paths[-1], host)
    cluster_file.write_json(os.path.join(workdir, "cluster.json"),
                            cluster_file.cluster_document(hosts, ranks, net))
    return paths


def _rank_env(base: dict[str, str], spec, world: int, net: netns.ClusterNetwork,
              master_port: int, host_path: str, cluster_path: str) -> dict[str, str]:
    env = dict(base)
    env.update({
        "RANK": str(spec.rank),
        "WORLD_SIZE": str(world),
        "LOCAL_RANK": str(spec.local_rank),
        "LOCAL_WORLD_SIZE": str(spec.local_world_size),
        "GROUP_RANK": str(spec.node),
        "NODE_RANK": str(spec.node),
        "MASTER_ADDR": net.address(0),
        "MASTER_PORT": str(master_port),
        # What a user pins on a real cluster: this host's topology with its NIC speed.
        "TORCH_TOPO_FILE": host_path,
        # Not a TORCH_TOPO_* variable (TopoConfig refuses unknown ones): for tools and tests.
        "EMULATED_CLUSTER_FILE": cluster_path,
    })
    # As torchrun does for several ranks per machine: one compute thread each, unless the user
    # chose; otherwise every rank's OpenMP pool spins on the same few cores.
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def run_emulated(args: argparse.Namespace) -> int:
    link, command = _validate(args)
    # Before any namespace exists: a bad --topology file fails fast, root or not.
    base_host = cluster_file.base_host(args.topology)
    netns.check_available()
    swept = netns.sweep_stale()
    if swept:
        print(f"torch_topo.emulate: removed {len(swept)} namespaces left by crashed runs",
              file=sys.stderr)
    net = netns.ClusterNetwork(nodes=args.nodes, link=link)
    ranks = place_ranks(args.nodes, args.procs_per_node, args.placement)
    workdir = tempfile.mkdtemp(prefix=f"{net.prefix}-")
    procs = RankProcesses()
    relay = None

    got_signal: list[int] = []

    def on_signal(signum, _frame):
        # Only recorded here: raising from the handler could land inside Popen and lose track
        # of a rank being spawned; check() raises at points where every child is accounted for.
        got_signal.append(signum)

    def check() -> None:
        if got_signal:
            raise _Interrupted(got_signal[0])

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        host_paths = _write_topology_files(workdir, net, ranks, base_host)
        net.create()
        check()
        relay = _start_relay(net)
        for spec in ranks:
            env = _rank_env(os.environ, spec, len(ranks), net, args.master_port,
                            host_paths[spec.node], os.path.join(workdir, "cluster.json"))
            check()
            procs.spawn(spec, net.node_ns(spec.node), net.hostname(spec.node), command, env)
        return procs.watch(args.grace_s, args.timeout_s, check)
    except _Interrupted as exc:
        print(f"torch_topo.emulate: got {exc}, stopping the ranks", file=sys.stderr)
        return 128 + exc.signum
    finally:
        # Further signals must not cut the cleanup short.
        for sig in old:
            signal.signal(sig, signal.SIG_IGN)
        procs.stop()
        if relay is not None:
            relay.terminate()
            try:
                relay.wait(timeout=5)
            except subprocess.TimeoutExpired:
                relay.kill()
                relay.wait()
        left = net.destroy()
        shutil.rmtree(workdir, ignore_errors=True)
        for sig, handler in old.items():
            signal.signal(sig, handler)
        if left:
            print(f"torch_topo.emulate: could not delete namespaces {left}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        return run_emulated(args)
    except netns.EmulationUnavailable as exc:
        print(exc, file=sys.stderr)
        return 2
    except (ValueError, RuntimeError) as exc:  # bad options, unreadable --topology file
        print(f"torch_topo.emulate: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
