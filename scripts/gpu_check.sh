#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Run THERE (a GPU machine, as it comes): builds the extension with CUDA, then runs every test
# under tests/gpu and every GPU benchmark, and ends with one summary table and one JSON file of
# all figures (gpu_check.json in $GPU_CHECK_OUT, default $OUT or out/gpu_check). Uses the
# dependencies scripts/gpu_prepare.sh unpacked into .gpu-deps/ where system headers are missing,
# and builds with a compiler that links the shared libstdc++ whatever CXX says.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-$(command -v python3 || command -v python)}"
OUT_DIR="${GPU_CHECK_OUT:-${OUT:-$ROOT/out/gpu_check}}"
mkdir -p "$OUT_DIR"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

DEPS="$ROOT/.gpu-deps/root"
if [ ! -f /usr/include/pugixml.hpp ] && [ -d "$DEPS" ]; then
  multiarch="$DEPS/usr/lib/x86_64-linux-gnu"
  export CPLUS_INCLUDE_PATH="$DEPS/usr/include${CPLUS_INCLUDE_PATH:+:$CPLUS_INCLUDE_PATH}"
  export LIBRARY_PATH="$multiarch${LIBRARY_PATH:+:$LIBRARY_PATH}"
  export LD_LIBRARY_PATH="$multiarch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export HWLOC_HOME="$DEPS/usr" HWLOC_PLUGINS_PATH="$multiarch/hwloc"
  echo "gpu_check: build dependencies from .gpu-deps (system headers missing)"
elif [ ! -f /usr/include/pugixml.hpp ]; then
  echo "gpu_check: no pugixml headers and no .gpu-deps; run scripts/gpu_prepare.sh where a" \
       "package registry is reachable and carry .gpu-deps" >&2
  exit 2
fi

# A wrapper that links a private libstdc++ (the image's /opt/gcc/bin/g++) crashes the module;
# setup.py refuses such a build, and here we pick one that shares torch's runtime up front.
CXX_PICKED="$("$PY" torch_topo/build_check.py --pick-compiler ${CXX:+"$CXX"} /usr/bin/g++ g++ c++)" \
  || { echo "gpu_check: no compiler links the shared libstdc++" >&2; exit 2; }
echo "gpu_check: CXX=$CXX_PICKED (was ${CXX:-unset})"
export CXX="$CXX_PICKED" LDSHARED="$CXX_PICKED -shared" LDCXXSHARED="$CXX_PICKED -shared"
export CUDAHOSTCXX="$CXX_PICKED"
gcc_beside="$(dirname "$CXX_PICKED")/gcc"
[ -x "$gcc_beside" ] && export CC="$gcc_beside"

# name|seconds allowed|command. Benchmarks write their figures to $OUT_DIR/<file>.json.
STEPS=(
  "build|240|MAX_JOBS=${MAX_JOBS:-16} TORCH_TOPO_BUILD_CUDA=1 $PY setup.py build_ext --inplace"
  "probe: show|30|$PY -m torch_topo show"
  "probe: doctor|30|$PY -m torch_topo doctor; test \$? -le 1"
  "tests/gpu|260|$PY -m pytest -q -rs -p no:cacheprovider tests/gpu --junitxml=$OUT_DIR/tests_gpu.xml"
)
STEPS+=(
  "bench: wrapper overhead|90|$PY benchmarks/wrapper_overhead.py --no-cpu --ops all_reduce all_gather --json $OUT_DIR/wrapper_overhead.json"
  "bench: sequence parallel|90|$PY benchmarks/sequence_parallel_gpu.py --quick --json $OUT_DIR/sequence_parallel_gpu.json"
)
# Exit 1 is a finding, not a failure: the H200 VM reports its GPU's PCIe width as unknown.
STEPS+=(
  "bench: CLI|90|$PY -m torch_topo bench --max-bytes 64M --check --json > $OUT_DIR/cli_bench.json; test \$? -le 1"
  "bench: CLI table|90|$PY -m torch_topo bench --max-bytes 256M --factor 16 --reps 3 --check --plot $OUT_DIR/cli_bench.png; test \$? -le 1"
)

declare -a SUMMARY
status=0
for step in "${STEPS[@]}"; do
  IFS='|' read -r name limit cmd <<<"$step"
  echo "== $name: $cmd"
  start=$(date +%s)
  timeout --kill-after=10 "$limit" bash -c "$cmd" 2>&1 | tee "$OUT_DIR/$(echo "$name" | tr -c 'a-zA-Z0-9_\n' _).log"
  rc=${PIPESTATUS[0]}
  if [ "$rc" = 0 ]; then result=ok; elif [ "$rc" = 124 ]; then result=TIMEOUT; else result=FAILED; fi
  [ "$result" = ok ] || status=1
  SUMMARY+=("$name|$result|$(( $(date +%s) - start ))")
  [ "$name" = build ] && [ "$result" != ok ] && break
done

echo
printf '%-34s %-8s %6s\n' step result time
for row in "${SUMMARY[@]}"; do IFS='|' read -r n r t <<<"$row"; printf '%-34s %-8s %5ss\n' "$n" "$r" "$t"; done
"$PY" - "$OUT_DIR" "${SUMMARY[@]}" <<'EOF'
import glob, json, os, platform, sys
out, rows = sys.argv[1], sys.argv[2:]
report = {"version": 1, "python": platform.python_version(), "steps": [], "figures": {}}
try:
    import torch
    report["torch"] = torch.__version__
    report["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
except Exception as err:  # the summary must be written even when torch cannot load
    report["torch_error"] = str(err)
for row in rows:
    name, result, seconds = row.split("|")
    report["steps"].append({"name": name, "result": result, "seconds": int(seconds)})
for path in sorted(glob.glob(os.path.join(out, "*.json"))):
    if os.path.basename(path) != "gpu_check.json":
        try:
            with open(path) as f:
                report["figures"][os.path.basename(path)[:-5]] = json.load(f)
        except (OSError, ValueError) as err:  # a benchmark cut off mid-write
            report["figures"][os.path.basename(path)[:-5]] = {"error": str(err)}
with open(os.path.join(out, "gpu_check.json"), "w") as f:
    json.dump(report, f, indent=1)
print(f"gpu_check: figures in {os.path.join(out, 'gpu_check.json')}")
EOF
exit $status
