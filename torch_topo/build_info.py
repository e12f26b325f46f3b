# SPDX-License-Identifier: Apache-2.0
"""What torch_topo._C was built against, recorded by the build and checked at import.

A C++ extension compiled against one torch and loaded with another fails in ways that do not
name the cause: an undefined symbol at load, or a crash at the first call whose layout moved.
The build records torch's version, its CUDA version and its C++ ABI in ``_build_info.json``
beside the module; ``import torch_topo`` compares them with the running torch before loading
the module and fails with one message naming both and the command that rebuilds.
"""

from __future__ import annotations

import json
import os

RECORD_NAME = "_build_info.json"
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


class BuildMismatchError(ImportError):
    """torch_topo._C was built against another torch than the one imported."""


def describe_torch() -> dict:
    """The facts of the imported torch that the extension's binary depends on."""
    import torch

    return {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
    }


def write_record(folder: str, source: str) -> str:
    """Writes the running torch's facts (and the source tree built) into `folder`."""
    path = os.path.join(folder, RECORD_NAME)
    with open(path, "w") as f:
        json.dump({**describe_torch(), "source": source}, f, indent=1)
        f.write("\n")
    return path


def _label(facts: dict) -> str:
    cuda = f"CUDA {facts['cuda']}" if facts.get("cuda") else "no CUDA"
    abi = "C++11 ABI" if facts.get("cxx11_abi") else "pre-C++11 ABI"
    return f"torch {facts.get('torch')} ({cuda}, {abi})"


def rebuild_command(source: str | None) -> str:
    """How to rebuild in the running environment, from the recorded source tree if it exists."""
    where = source if source and os.path.isdir(source) else "<torch-topo source or torch-topo>"
    return f"pip install --no-build-isolation --no-deps --force-reinstall {where}"


def mismatch(built: dict, running: dict) -> str | None:
    """The error message when `built` and `running` differ in torch, CUDA or ABI, else None."""
    keys = ("torch", "cuda", "cxx11_abi")
    if all(built.get(k) == running.get(k) for k in keys):
        return None
    return (f"torch-topo: torch_topo._C was built against {_label(built)} but this process runs "
            f"{_label(running)}; rebuild it in this environment: "
            f"{rebuild_command(built.get('source'))}")


def check(package_dir: str = _PACKAGE_DIR) -> None:
    """Raises BuildMismatchError unless the record beside the module matches the running torch.

    A build without a record (CMake's LibTorch target) is not checked here; a load failure then
    still names the likely cause (see `explain_load_failure`).
    """
    path = os.path.join(package_dir, RECORD_NAME)
    try:
        with open(path) as f:
            built = json.load(f)
    except FileNotFoundError:
        return
    except (OSError, ValueError) as err:
        raise BuildMismatchError(f"torch-topo: cannot read {path}: {err}; rebuild: "
                                 f"{rebuild_command(None)}") from None
    message = mismatch(built, describe_torch())
    if message:
        raise BuildMismatchError(message)


def explain_load_failure(err: ImportError) -> None:
    """Re-raises an unresolved symbol while loading the module as the likely cause and its fix;
    returns for any other load failure."""
    if "undefined symbol" not in str(err):
        return
    raise BuildMismatchError(
        f"torch-topo: torch_topo._C does not fit the torch imported ({_label(describe_torch())}):"
        f" {err}; it was built against another torch; rebuild it in this environment: "
        f"{rebuild_command(None)}") from err
