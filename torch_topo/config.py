# SPDX-License-Identifier: Apache-2.0
"""`TopoConfig`: the options of the "topo" backend.

Pass one as `pg_options` to `torch.distributed.init_process_group(backend="topo", ...)`, or set
the matching `TORCH_TOPO_*` environment variables (read by `TopoConfig.from_env()`); a field given
to the constructor wins over the environment whatever its value, default values included.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

__all__ = ["TopoConfig", "ENV_VARS", "OTHER_VARS", "parse_bool"]

# Each variable sits beside the field it sets; the README's table lists the same pairs
# (tests/py/test_docs.py compares the two).
ENV_VARS: dict[str, str] = {
    "timeout_s": "TORCH_TOPO_TIMEOUT",
    "use_topo_aware_collectives": "TORCH_TOPO_AWARE",
    "hierarchical": "TORCH_TOPO_HIERARCHICAL",
    "pipeline_chunk_bytes": "TORCH_TOPO_CHUNK_BYTES",
    "topology_file": "TORCH_TOPO_FILE",
    "bind_numa": "TORCH_TOPO_BIND_NUMA",
    "nccl_hints": "TORCH_TOPO_NCCL_HINTS",
    "debug": "TORCH_TOPO_DEBUG",
    "play": "TORCH_TOPO_PLAY",
    "inter_host_gbps": "TORCH_TOPO_INTER_HOST_GBPS",
    "inter_host_latency_us": "TORCH_TOPO_INTER_HOST_LATENCY_US",
}

# TORCH_TOPO_* variables that set no field, and who reads them; from_env accepts them so that
# a process started with one (a build, a test run) can still create "topo" groups.
OTHER_VARS: dict[str, str] = {
    "TORCH_TOPO_VENV": "scripts/setup_env.sh: the virtualenv's path",
    "TORCH_TOPO_TORCH_VERSION": "scripts/setup_env.sh: the torch release to install",
    "TORCH_TOPO_BUILD_CUDA": "setup.py: 0 skips the CUDA parts",
    "TORCH_TOPO_WITH_HWLOC": "setup.py: 0 builds without hwloc",
    "TORCH_TOPO_TEST_BACKEND": "tests/py/test_mesh.py: the backend of its pinned-file test",
}


# A timeout below a millisecond reaches c10d as 0 ms, and every wait then times out at once;
# 9.5e9 s made Gloo time out at once too (its deadline, now + timeout in nanoseconds, passed
# 2**63 ns = 292 years and wrapped), and 1e13 s failed its "Invalid timeout" check. 5e9 s
# (about 158 years) still admits the "100 years means never" idiom.
MIN_TIMEOUT_S = 1e-3
MAX_TIMEOUT_S = 5e9
# The C++ levels take the chunk as int64; no tensor comes near 1 TiB, so the bound only refuses
# values that would fail there (2**70 was a pybind11 TypeError at group creation).
MAX_CHUNK_BYTES = 1 << 40
# csrc/topo/topology_json.cpp holds a file's link bandwidths to the same range: 1e-300 GB/s would
# price every inter-host message at infinite time and 1e300 at none.
MIN_LINK_GBPS = 1e-6
MAX_LINK_GBPS = 1e6
# The same file range for latencies: 1 ps to 1 s.
MIN_LINK_LATENCY_US = 1e-6
MAX_LINK_LATENCY_US = 1e6


def parse_bool(name: str, text: str) -> bool:
    """The one reading of a boolean variable: 1/true/yes/on or 0/false/no/off, any case.

    Args:
        name: the variable, named in the error.
        text: its value.
    """
    low = text.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{name}: got {text!r}, expected one of 1/0/true/false/yes/no/on/off "
                     "(any case)")


class _RecordsGivenFields:
    """Remembers which keyword arguments built an instance (`__new__` sees the same ones as
    `__init__`), so that a field given explicitly is known even when it equals its default.
    A slot of this base, not a dataclass field: it is no option and takes no part in ==."""

    __slots__ = ("_given",)

    def __new__(cls, *args, **kwargs):
        self = super().__new__(cls)
        object.__setattr__(self, "_given", frozenset(kwargs))  # past the frozen __setattr__
        return self

    def __reduce__(self):
        # A frozen slots dataclass pickles and copies its fields only, so a copy came back with
        # no given fields and let the environment override them. Rebuilt from the given ones
        # (every other field holds its default: nothing sets a field but the constructor).
        return _rebuild, (type(self), {name: getattr(self, name) for name in self._given})


def _rebuild(cls, given: dict) -> _RecordsGivenFields:
    return cls(**given)


@dataclass(frozen=True, kw_only=True, slots=True)
class TopoConfig(_RecordsGivenFields):
    """Options of the "topo" backend. Every field has an environment variable (`ENV_VARS`);
    the fields given to the constructor win over it (`explicit_fields`). Frozen, so that no
    field escapes the constructor's checks: derive a changed one with `with_fields`."""

    timeout_s: float | None = None
    """Per-collective timeout in seconds; None keeps the process group's timeout."""

    use_topo_aware_collectives: bool = True
    """Exchange the cluster, build the hierarchical levels (intra-host and inter-host inner
    groups) and run Gloo's reduce-scatter, all-gather and two-rank all-reduce as one exchange
    step; False makes "topo" a plain wrapper that issues exactly the calls of Gloo (CPU) and
    NCCL (CUDA)."""

    hierarchical: Literal["auto", "always", "never"] = "auto"
    """Hierarchical (intra-host, then inter-host) schedules: chosen by the cost model ("auto"),
    forced where the group spans several hosts ("always"), or never used."""

    pipeline_chunk_bytes: int = 4 << 20
    """Chunk size in bytes that pipelines the levels of a hierarchical schedule."""

    topology_file: str | None = None
    """Pinned topology file (nvidia-smi text, NCCL XML, hwloc XML or torch-topo JSON); wins
    over the live probe, and init_device_mesh plans on it instead of the exchanged cluster.
    None falls back to NCCL_TOPO_FILE when that is set."""

    bind_numa: bool = False
    """Bind every thread of the rank to the CPUs nearest its GPU, and make that GPU's NUMA node
    the preferred memory node of the calling thread (and of threads it starts later), when the
    "topo" world group is created (before its inner backends start threads), unless the
    launcher already bound it; the report is printed once (torch_topo.numa)."""

    nccl_hints: bool = False
    """Create each mesh group's NCCL communicator with the cost model's NCCL_ALGO choice for
    the collective its dimension was costed with (init_device_mesh on a "topo" world, NCCL
    >= 2.24.3; torch_topo.nccl_hints says what is and is not covered)."""

    debug: bool = False
    """Log to stderr every flat/hierarchical decision of the C++ backend (one line per
    collective) and the hierarchy chosen at group creation."""

    play: str | None = None
    """Testing aid, also for users rehearsing a layout: "HOST:GPU[,HOST:GPU...]" indexed by rank
    (or "HOST:GPU" for this rank alone) makes the rank play a GPU of the pinned topology file
    on a named host (without a pinned file, only the host), so multi-host layouts can be
    exercised on one CPU machine."""

    inter_host_gbps: float | None = None
    """Measured or pinned network bandwidth between hosts in GB/s per direction; None derives it
    from the NIC speeds the hosts report (the slowest host's fastest NIC)."""

    inter_host_latency_us: float | None = None
    """Measured or pinned one-way latency between hosts in microseconds. None: NCCL's network
    hop for GPU groups, and for Gloo (TCP) groups that hop but no less than 50 us."""

    def __post_init__(self) -> None:
        # Types first: "0" would pass as a true flag and a string timeout would fail only at
        # group creation, far from the option that caused it.
        for name in ("use_topo_aware_collectives", "bind_numa", "nccl_hints", "debug"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"TopoConfig.{name}: got {getattr(self, name)!r}, expected "
                                 "True or False")
        for name in ("topology_file", "play"):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), str):
                raise ValueError(f"TopoConfig.{name}: got {getattr(self, name)!r}, expected a "
                                 "string or None")
        if isinstance(self.pipeline_chunk_bytes, bool) or not isinstance(
                self.pipeline_chunk_bytes, int):
            raise ValueError(f"TopoConfig.pipeline_chunk_bytes: got "
                             f"{self.pipeline_chunk_bytes!r}, expected an integer")
        for name in ("timeout_s", "inter_host_gbps", "inter_host_latency_us"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)
                                      or not math.isfinite(value) or not value > 0):
                raise ValueError(f"TopoConfig.{name}: got {value!r}, expected a finite number "
                                 "> 0 or None")
        for name, low, high, unit, what in (
                ("inter_host_gbps", MIN_LINK_GBPS, MAX_LINK_GBPS, "GB/s", "bandwidths"),
                ("inter_host_latency_us", MIN_LINK_LATENCY_US, MAX_LINK_LATENCY_US, "us",
                 "latencies")):
            value = getattr(self, name)
            if value is not None and not low <= value <= high:
                raise ValueError(f"TopoConfig.{name}: got {value!r}, expected >= {low:g} and "
                                 f"<= {high:g} {unit} (the range a topology file's {what} are "
                                 "held to)")
        if self.timeout_s is not None and not (
                MIN_TIMEOUT_S <= self.timeout_s <= MAX_TIMEOUT_S):
            raise ValueError(f"TopoConfig.timeout_s: got {self.timeout_s!r}, expected >= "
                             f"{MIN_TIMEOUT_S} and <= {MAX_TIMEOUT_S:g} seconds (c10d counts "
                             "whole milliseconds, and Gloo's deadlines in nanoseconds overflow "
                             "past 292 years)")
        if self.hierarchical not in ("auto", "always", "never"):
            raise ValueError(
                f"TopoConfig.hierarchical: got {self.hierarchical!r}, "
                "expected 'auto', 'always' or 'never'"
            )
        if not 1024 <= self.pipeline_chunk_bytes <= MAX_CHUNK_BYTES:
            raise ValueError(
                f"TopoConfig.pipeline_chunk_bytes: got {self.pipeline_chunk_bytes}, "
                f"expected >= 1024 and <= {MAX_CHUNK_BYTES} (2**40: a larger chunk pipelines "
                "nothing more)"
            )

    @property
    def explicit_fields(self) -> frozenset[str]:
        """The fields given to the constructor (`dataclasses.replace` gives all of them)."""
        return self._given

    def with_fields(self, **changes) -> TopoConfig:
        """This config with `changes` given too; the fields it was not given stay so (unlike
        `dataclasses.replace`, which gives every field, so that `topology_file=None` came to
        mean "no pinned file" and hid NCCL_TOPO_FILE from the backend's probe)."""
        return type(self)(**{**{name: getattr(self, name) for name in self._given}, **changes})

    @property
    def timeout(self) -> timedelta | None:
        return None if self.timeout_s is None else timedelta(seconds=self.timeout_s)

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **overrides) -> TopoConfig:
        """Reads `TORCH_TOPO_*`; keyword overrides win. Unknown variables and bad values raise
        ValueError naming the variable; an empty variable counts as unset."""
        if environ is not None and not isinstance(environ, Mapping):
            raise ValueError(f"TopoConfig.from_env: environ: got {type(environ).__name__}, "
                             "expected None or a mapping of variable to value (os.environ)")
        env = os.environ if environ is None else environ
        known = set(ENV_VARS.values()) | set(OTHER_VARS)
        unknown = sorted(k for k in env if k.startswith("TORCH_TOPO_") and k not in known)
        if unknown:
            raise ValueError(
                f"TopoConfig.from_env: unknown variable {unknown[0]}, expected one of "
                + ", ".join(sorted(ENV_VARS.values()))
                + " (the config's) or " + ", ".join(sorted(OTHER_VARS)) + " (build and tests)"
            )
        kwargs: dict[str, object] = {}
        types = {f.name: f.type for f in dataclasses.fields(cls)}
        for name, var in ENV_VARS.items():
            if not env.get(var, "").strip() or name in overrides:
                continue
            text = env[var]
            kind = types[name]
            if "bool" in kind:
                kwargs[name] = parse_bool(var, text)
            elif kind.startswith("int"):
                try:
                    kwargs[name] = int(text)
                except ValueError:
                    raise ValueError(f"{var}: got {text!r}, expected an integer") from None
            elif kind.startswith("float"):
                try:
                    kwargs[name] = float(text)
                except ValueError:
                    raise ValueError(f"{var}: got {text!r}, expected a number") from None
            else:
                kwargs[name] = text
        from_env = {f"TopoConfig.{name}:": ENV_VARS[name] for name in kwargs}
        kwargs.update(overrides)
        try:
            return cls(**kwargs)
        except ValueError as exc:  # a field's own check: say which variable set it
            var = next((v for prefix, v in from_env.items() if str(exc).startswith(prefix)), None)
            if var is None:
                raise
            raise ValueError(f"{var}: {exc}") from None

    def effective(self, name: str):
        """A field's value where it was given (a merged config gives every field the environment
        set), else its variable's: `TopoConfig(play=None)` plays nothing whatever
        TORCH_TOPO_PLAY says, and a config built in code without a field still sees the
        variable. An empty variable counts as unset."""
        if name in self._given:
            return getattr(self, name)
        return getattr(self.merged_with_env(), name)

    def merged_with_env(self) -> TopoConfig:
        """This config with environment values filling the fields it was not given; a given
        field keeps its value even where that is the default (debug=False beats
        TORCH_TOPO_DEBUG=1)."""
        return TopoConfig.from_env(**{name: getattr(self, name) for name in self._given})
