# SPDX-License-Identifier: Apache-2.0
"""Network namespaces of one emulated cluster: one per node plus one switch, joined in a star.

Every object lives inside namespaces this module creates (veth pairs are created directly
inside them, addresses are 10.213.0.0/24 inside the node namespaces), so deleting the
namespaces removes links and qdiscs too and nothing ever touches the host's interfaces. Names
carry the creating process id ("ttemu<pid>-n0"), which lets a later run sweep what a crashed
run left behind without disturbing a live one.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field

from torch_topo.emulation.shaping import LinkSpec, tbf_command

__all__ = ["EmulationUnavailable", "ClusterNetwork", "sweep_stale", "check_available",
           "list_namespaces", "NS_PREFIX"]

NS_PREFIX = "ttemu"
_NS_NAME = re.compile(rf"^{NS_PREFIX}(\d+)-")
_SUBNET = "10.213.0"  # private range, exists only inside the node namespaces
_NODE_IFNAME = "eth0"  # the same name on every node, like the NIC of identical hosts
_ETC_NETNS = "/etc/netns"  # `ip netns exec` bind-mounts /etc/netns/<ns>/hosts over /etc/hosts


class EmulationUnavailable(RuntimeError):
    """The emulator cannot run here (not root, no `ip`/`tc`, namespaces refused)."""


def _setup_command(cmd: list[str], stdin: str | None = None) -> subprocess.CompletedProcess:
    # In a session of its own: Ctrl-C at a terminal signals the whole foreground process group,
    # and a setup command killed by it turned the interrupted run into a setup failure (exit 2)
    # where the emulator itself records the signal and exits 130 once the command is done.
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True,
                          start_new_session=True)


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = _setup_command(["ip", *args])
    if check and proc.returncode != 0:
        raise EmulationUnavailable(f"ip {' '.join(args)}: {proc.stderr.strip() or proc.returncode}")
    return proc


def _run_in(ns: str, cmd: list[str]) -> None:
    proc = _setup_command(["ip", "netns", "exec", ns, *cmd])
    if proc.returncode != 0:
        raise EmulationUnavailable(f"in {ns}: {' '.join(cmd)}: {proc.stderr.strip()}")


def check_available() -> None:
    """Raises EmulationUnavailable naming what is missing."""
    if os.geteuid() != 0:
        raise EmulationUnavailable(
            "torch_topo.emulate: needs root (network namespaces, veth and tc); "
            "run it as root or inside a container with CAP_NET_ADMIN and CAP_SYS_ADMIN"
        )
    # hostname names each node inside its namespace, sysctl tunes the switch's forwarding.
    for tool, package in (("ip", "iproute2"), ("tc", "iproute2"), ("unshare", "util-linux"),
                          ("hostname", "hostname"), ("sysctl", "procps")):
        if shutil.which(tool) is None:
            raise EmulationUnavailable(
                f"torch_topo.emulate: `{tool}` not found; install {package}"
            )


def list_namespaces() -> list[str]:
    out = _ip("netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _delete_namespace(ns: str) -> None:
    # Processes still inside (ranks of a run whose emulator was SIGKILLed) would keep the
    # namespace alive after its name is gone.
    for pid in _ip("netns", "pids", ns, check=False).stdout.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    _ip("netns", "delete", ns, check=False)
    shutil.rmtree(os.path.join(_ETC_NETNS, ns), ignore_errors=True)


def sweep_stale() -> list[str]:
    """Deletes namespaces (and their /etc/netns files) of emulator runs whose process is gone."""
    names = set(list_namespaces())
    if os.path.isdir(_ETC_NETNS):
        names.update(os.listdir(_ETC_NETNS))
    stale = []
    for ns in sorted(names):
        match = _NS_NAME.match(ns)
        if match and not _pid_alive(int(match.group(1))):
            _delete_namespace(ns)
            stale.append(ns)
    # The topology files of those runs (emulate.py's work directories).
    tmp = tempfile.gettempdir()
    for entry in os.listdir(tmp):
        match = _NS_NAME.match(entry)
        if match and not _pid_alive(int(match.group(1))):
            shutil.rmtree(os.path.join(tmp, entry), ignore_errors=True)
    return stale


def _node_mac(node: int) -> str:
    # Locally administered unicast (0x02), fixed so the relay and neighbour tables agree.
    return f"02:74:74:00:{node >> 8:02x}:{node & 0xFF:02x}"


@dataclass
class ClusterNetwork:
    """The namespaces and links of one run; `create()` builds them, `destroy()` removes them."""

    nodes: int
    link: LinkSpec
    owner_pid: int = field(default_factory=os.getpid)
    created: list[str] = field(default_factory=list)

    @property
    def prefix(self) -> str:
        return f"{NS_PREFIX}{self.owner_pid}"

    @property
    def switch_ns(self) -> str:
        return f"{self.prefix}-sw"

    def node_ns(self, node: int) -> str:
        return f"{self.prefix}-n{node}"

    @staticmethod
    def hostname(node: int) -> str:
        return f"node{node}"

    @staticmethod
    def address(node: int) -> str:
        return f"{_SUBNET}.{node + 1}"

    @property
    def ifname(self) -> str:
        return _NODE_IFNAME

    def relay_ports(self) -> list[str]:
        """`IFNAME=MAC` of every switch port, MAC being the node behind it."""
        return [f"p{i}={_node_mac(i)}" for i in range(self.nodes)]

    def _add_namespace(self, ns: str) -> None:
        # Recorded before creation so a failure half way still gets cleaned up.
        self.created.append(ns)
        proc = _ip("netns", "add", ns, check=False)
        if proc.returncode != 0:
            raise EmulationUnavailable(
                f"torch_topo.emulate: cannot create network namespace {ns}: "
                f"{proc.stderr.strip()}; namespaces must be available (root, not in a "
                "restricted container)"
            )
        _ip("-n", ns, "link", "set", "lo", "up")
        # No IPv6: its router and neighbour chatter would cross the shaped links.
        _run_in(ns, ["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                     "net.ipv6.conf.default.disable_ipv6=1"])

    def create(self) -> None:
        self._add_namespace(self.switch_ns)
        hosts = ["127.0.0.1 localhost"] + [
            f"{self.address(i)} {self.hostname(i)}" for i in range(self.nodes)
        ]
        for i in range(self.nodes):
            ns, port = self.node_ns(i), f"p{i}"
            self._add_namespace(ns)
            _ip("link", "add", "name", _NODE_IFNAME, "netns", ns, "type", "veth",
                "peer", "name", port, "netns", self.switch_ns)
            _ip("-n", ns, "link", "set", _NODE_IFNAME, "address", _node_mac(i))
            _ip("-n", ns, "addr", "add", f"{self.address(i)}/24", "dev", _NODE_IFNAME)
            _ip("-n", ns, "link", "set", _NODE_IFNAME, "up")
            _ip("-n", self.switch_ns, "link", "set", port, "up")
            # Uplink (node -> switch) and downlink (switch -> node) each at the line rate.
            _run_in(ns, tbf_command(_NODE_IFNAME, self.link, downlink=False))
            _run_in(self.switch_ns, tbf_command(port, self.link, downlink=True))
            # Static neighbours: no ARP round trips through the delayed switch. One ip process
            # per node reads them all, as one per pair made set-up quadratic in processes.
            neighbours = "".join(
                f"neigh replace {self.address(j)} lladdr {_node_mac(j)} dev {_NODE_IFNAME} "
                "nud permanent\n" for j in range(self.nodes) if j != i)
            if neighbours:
                proc = _setup_command(["ip", "-n", ns, "-batch", "-"], stdin=neighbours)
                if proc.returncode != 0:
                    raise EmulationUnavailable(
                        f"ip -n {ns} -batch (static neighbours): "
                        f"{proc.stderr.strip() or proc.returncode}")
            etc = os.path.join(_ETC_NETNS, ns)
            os.makedirs(etc, exist_ok=True)
            with open(os.path.join(etc, "hosts"), "w") as f:
                f.write("\n".join(hosts) + "\n")

    def destroy(self) -> list[str]:
        """Deletes every namespace of this run; returns those still listed afterwards."""
        for ns in reversed(self.created):
            _delete_namespace(ns)
        self.created.clear()
        return [ns for ns in list_namespaces() if ns.startswith(self.prefix + "-")]
