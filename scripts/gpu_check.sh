#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Run THERE (a GPU machine, as it comes): builds the extension with CUDA, then runs the world 2
# and 4 rehearsal on the one GPU (issue 21), the probe, the sequence-parallel benchmark, every
# test under tests/gpu and the other GPU benchmarks, and ends with one summary table and one
# JSON file of all figures. Uses the wheels scripts/gpu_prepare.sh put into .gpu-deps/ where
# system libraries are missing, and builds with a compiler that links the shared libstdc++
# whatever CXX says.
#
# A lease is short and brings back few files, so the steps share one deadline
# (GPU_CHECK_SECONDS, default 540, bounds the whole run: each step gets the smaller of its own
# limit and what is left, most important first, and the summary still fits in) and
# $GPU_CHECK_OUT (default $OUT or out/gpu_check) receives six files: gpu_check.log (everything
# printed), gpu_check.json (steps and every figure), tests_gpu.xml, tests_rehearsal.xml,
# tests_train.xml and cli_bench.png, plus the built module stripped of debug information and
# its build record (_build_info.json, checked at import):
# a second lease can carry both back and skip the build (GPU_CHECK_SKIP_BUILD=1, which only
# checks that the module imports). GPU_CHECK_ONLY (an extended regex on step names) runs a
# subset. Per-step files stay in a scratch folder.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-$(command -v python3 || command -v python)}"
OUT_DIR="${GPU_CHECK_OUT:-${OUT:-$ROOT/out/gpu_check}}"
WORK="$(mktemp -d)"
mkdir -p "$OUT_DIR"
# A step that ignores SIGINT (a rank stuck in a CUDA call) is killed KILL_AFTER_S later, and the
# summary imports torch: both come after the last step, so the steps end that much earlier
# and a caller bounding the run by GPU_CHECK_SECONDS still gets gpu_check.json.
KILL_AFTER_S=15 SUMMARY_S=10
DEADLINE=$(( $(date +%s) + ${GPU_CHECK_SECONDS:-540} - KILL_AFTER_S - SUMMARY_S ))
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
exec > >(tee "$OUT_DIR/gpu_check.log") 2>&1
TEE_PID=$!
# A watchdog abort or the killed-rank test must not spend the lease writing core files.
ulimit -c 0

# The build libraries the image lacks come from the wheels scripts/gpu_prepare.sh carried,
# installed beside the checkout; setup.py prefers the system's where it has them.
WHEELS="$ROOT/.gpu-deps/wheels" SITE="$ROOT/.gpu-deps/site"
if compgen -G "$WHEELS/*.whl" >/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --upgrade --target "$SITE" "$WHEELS"/*.whl || {
    echo "gpu_check: installing the carried wheels into .gpu-deps/site failed" >&2; exit 2; }
  export PYTHONPATH="$PYTHONPATH:$SITE"
  # libhwloc is opened at run time: the wheel's copy where the image has none.
  export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$SITE/cmeel.prefix/lib"
  echo "gpu_check: build libraries from .gpu-deps/wheels where the system has none"
elif [ ! -f /usr/include/tinyxml2.h ]; then
  echo "gpu_check: no TinyXML-2 headers and no .gpu-deps/wheels; run scripts/gpu_prepare.sh" \
       "where PyPI is reachable and carry .gpu-deps" >&2
  exit 2
fi

# A wrapper that links a private libstdc++ (the image's /opt/gcc/bin/g++) crashes the module;
# setup.py refuses such a build, and here we pick one that shares torch's runtime up front.
CXX_PICKED="$("$PY" torch_topo/build_check.py --pick-compiler ${CXX:+"$CXX"} /usr/bin/g++ g++ c++)" \
  || { echo "gpu_check: no compiler links the shared libstdc++" >&2; exit 2; }
echo "gpu_check: CXX=$CXX_PICKED (was ${CXX:-unset})"
export CXX="$CXX_PICKED" LDSHARED="$CXX_PICKED -shared" LDCXXSHARED="$CXX_PICKED -shared"
export CUDAHOSTCXX="$CXX_PICKED"
# Compile for the GPU that is here (one nvcc pass instead of setup.py's two guesses).
arch="$("$PY" -c 'import torch; print("%d.%d" % torch.cuda.get_device_capability())' 2>/dev/null)"
[ -n "$arch" ] && export TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-$arch}"
gcc_beside="$(dirname "$CXX_PICKED")/gcc"
[ -x "$gcc_beside" ] && export CC="$gcc_beside"

# name|seconds allowed|command, most important first. Benchmarks write JSON into $WORK.
STEPS=(
  "build|240|MAX_JOBS=${MAX_JOBS:-16} TORCH_TOPO_BUILD_CUDA=1 $PY setup.py build_ext --inplace && { for so in torch_topo/_C.*.so; do strip --strip-debug -o \"$OUT_DIR/\$(basename \$so)\" \$so; done; cp torch_topo/_build_info.json \"$OUT_DIR/\"; }"
  # Issue 21: world > 1 on the one GPU (python -m torch_topo.emulate --one-gpu). First the
  # mechanism itself; the setting it finds working is handed to the later launches.
  "rehearsal: NCCL_HOSTID|90|$PY tests/gpu/nccl_hostid_check.py --worlds 2 4 8 --timeout-s 40 --json $WORK/nccl_hostid.json"
  # The rehearsal tests in three steps (the slow ones last), so a step cut off by the deadline
  # leaves the earlier ones' reports; all four are skipped when no NCCL_HOSTID setting worked
  # at world 2 (each launch would only wait for its timeout).
  "tests/gpu: world 2 and 4|180|$PY -m pytest -q -rs -p no:cacheprovider tests/gpu/test_rehearsal_cuda.py -k 'not train_llama and not killed' --junitxml=$OUT_DIR/tests_rehearsal.xml"
  "tests/gpu: killed rank|90|$PY -m pytest -q -rs -p no:cacheprovider tests/gpu/test_rehearsal_cuda.py -k killed"
  # Issue 21 item 4: the overlap ops' hidden fraction beside torch's symmetric-memory fused
  # op, Ulysses and ring beside torch's context_parallel, world 2 and 4 (--timeout-s per launch).
  "bench: rehearsal ops vs torch|100|$PY benchmarks/rehearsal_ops_gpu.py --quick --timeout-s 60 --json $WORK/rehearsal_ops_gpu.json"
  "tests/gpu: train_llama|200|$PY -m pytest -q -rs -p no:cacheprovider tests/gpu/test_rehearsal_cuda.py -k train_llama --junitxml=$OUT_DIR/tests_train.xml"
  "bench: rehearsal topo vs NCCL|100|$PY benchmarks/rehearsal_gpu.py --quick --timeout-s 40 --json $WORK/rehearsal_gpu.json"
  "probe: show, doctor|30|$PY -m torch_topo show && { $PY -m torch_topo doctor; test \$? -le 1; }"
  "bench: sequence parallel|100|$PY benchmarks/sequence_parallel_gpu.py --quick --json $WORK/sequence_parallel_gpu.json"
  "bench: overlap ops|60|$PY benchmarks/overlap_gpu.py --quick --json $WORK/overlap_gpu.json"
  "tests/gpu|200|$PY -m pytest -q -rs -p no:cacheprovider --timeout 90 tests/gpu/test_ops_cuda.py tests/gpu/test_overlap_cuda.py tests/gpu/test_probe_cuda.py tests/gpu/test_probe_sources_cuda.py tests/gpu/test_backend_cuda.py tests/gpu/test_bench_cuda.py --junitxml=$OUT_DIR/tests_gpu.xml"
  "bench: wrapper overhead|45|$PY benchmarks/wrapper_overhead.py --no-cpu --ops all_reduce all_gather --json $WORK/wrapper_overhead.json"
)
# Exit 1 is a finding, not a failure: the H200 VM reports its GPU's PCIe width as unknown.
STEPS+=(
  "bench: CLI|60|$PY -m torch_topo bench --max-bytes 256M --factor 16 --reps ${GPU_CHECK_BENCH_REPS:-5} --check --json --plot $OUT_DIR/cli_bench.png > $WORK/cli_bench.json; test \$? -le 1"
)

summary() {
  echo
  printf '%-34s %-8s %6s\n' step result time
  for row in "${SUMMARY[@]}"; do IFS='|' read -r n r t <<<"$row"; printf '%-34s %-8s %5ss\n' "$n" "$r" "$t"; done
  "$PY" - "$OUT_DIR" "$WORK" "${SUMMARY[@]}" <<'EOF'
import glob, json, os, platform, sys
out, work, rows = sys.argv[1], sys.argv[2], sys.argv[3:]
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
for path in sorted(glob.glob(os.path.join(work, "*.json"))):
    try:
        with open(path) as f:
            report["figures"][os.path.basename(path)[:-5]] = json.load(f)
    except (OSError, ValueError) as err:  # a benchmark cut off mid-write
        report["figures"][os.path.basename(path)[:-5]] = {"error": str(err)}
with open(os.path.join(out, "gpu_check.json"), "w") as f:
    json.dump(report, f, indent=1)
print(f"gpu_check: figures in {os.path.join(out, 'gpu_check.json')}")
EOF
}
# Stopped from outside (the lease's own limit), the steps so far are still summed up.
trap 'SUMMARY+=("${current:-between steps}|STOPPED|$(( $(date +%s) - ${start:-$(date +%s)} ))"); summary; exit 1' TERM INT

declare -a SUMMARY
status=0
for step in "${STEPS[@]}"; do
  IFS='|' read -r name limit cmd <<<"$step"
  [ -n "${GPU_CHECK_ONLY:-}" ] && ! [[ "$name" =~ $GPU_CHECK_ONLY ]] && continue
  if [ "$name" = build ] && [ "${GPU_CHECK_SKIP_BUILD:-0}" = 1 ]; then
    cmd="$PY -c 'import torch_topo._C as C; print(\"prebuilt module:\", C.__file__, \"cuda:\", C.cuda_built)'"
  fi
  start=$(date +%s)
  left=$(( DEADLINE - start ))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -lt 5 ]; then SUMMARY+=("$name|NOT RUN|0"); status=1; continue; fi
  if [ "${REHEARSAL_BLOCKED:-0}" = 1 ] && [[ "$name" =~ ^(tests/gpu: (world|killed|train)|bench: rehearsal) ]]; then
    SUMMARY+=("$name|SKIPPED|0"); status=1; continue
  fi
  current="$name"
  echo "== $name (${limit}s): $cmd"
  # SIGINT first: pytest then still prints its failures and writes its report.
  timeout --signal=INT --kill-after="$KILL_AFTER_S" "$limit" bash -c "$cmd"
  rc=$?
  if [ "$rc" = 0 ]; then result=ok; elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then result=TIMEOUT; else result=FAILED; fi
  [ "$result" = ok ] || status=1
  SUMMARY+=("$name|$result|$(( $(date +%s) - start ))")
  current=""
  [ "$name" = build ] && [ "$result" != ok ] && break
  if [ "$name" = "rehearsal: NCCL_HOSTID" ]; then
    # The NCCL variables of the setting that worked at the largest world tried (none: default),
    # and whether the rest is blocked: only a check that ran on a GPU and found nothing working
    # at world 2 blocks it.
    { read -r REHEARSAL_BLOCKED; read -r GPU_CHECK_NCCL_ENV; } < <("$PY" -c 'import json, sys
try:
    d = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    d = {}
ok = [a for a in d.get("attempts", []) if a["rc"] == 0]
print(int("attempts" in d and "2" not in d.get("working", {})))
print(" ".join(max(ok, key=lambda a: a["world"])["nccl_env"]) if ok else "")' "$WORK/nccl_hostid.json")
    export GPU_CHECK_NCCL_ENV
    echo "gpu_check: rehearsal launches get --nccl-env for: ${GPU_CHECK_NCCL_ENV:-nothing}"
    [ "$REHEARSAL_BLOCKED" = 1 ] && echo "gpu_check: no setting ran 2 ranks on this GPU; the rehearsal steps are skipped"
  fi
done

summary
# Let tee write the last lines before the lease collects the log.
exec >&- 2>&-
wait "$TEE_PID" 2>/dev/null
exit $status
