#!/usr/bin/env bash
# Scale-out proof on nvidia-h200-x2, in one device call: the two cells of `pinset matrix` over
# reports/scale-out/pins.yaml (build 0.3.36 x GPU classes h200 = sm_90 and h200-sm90a = sm_90a) run exactly
# as the reusable workflow's `cell` job runs them (the cell's `script`, one command per line, each in turn,
# the cell red if one failed), each pinned to its own H200 with CUDA_VISIBLE_DEVICES, each with its own pinset
# cache (as two runners have), one ccache shared by both (standing in for CCACHE_REMOTE_STORAGE shared between
# runners). After each phase `pinset report --expect` merges the cells into one comment, one column per
# build x GPU class x GPU.
#
# Phases (each skipped when fewer seconds are left than it needs; see PHASES):
#   cold-parallel    both cells at once, empty pinset caches and ccache: the first run of two fresh runners
#   warm-sequential  cell 0 on GPU 0, then cell 1 on GPU 1, each cell's pinset cache kept from cold-parallel
#   warm-parallel    both cells at once, same state as warm-sequential
# The fair comparison is warm-parallel against warm-sequential: both reuse the warm build cache the same way
# (each cell's own pinset cache from cold-parallel, as a persistent runner's workspace: the trees and build
# folders are found, nothing is compiled) and run every gate's tests again (test-chat, test-backend-ops, the
# feature checks). cold-parallel is the figure with nothing cached (two full CPU+CUDA builds at once).
#
# usage (repo root on the device; carry .carry and .whl, made with
#   python scripts/device_carry.py --version 0.3.36 --out .carry
#   python scripts/device_carry.py --wheels .whl):
#     LIMIT=580 bash reports/scale-out/run_two_gpus.sh
# PHASES="warm-parallel" in a second call on the still-warm machine runs what the first call had to skip
# (the pinset caches and ccache under /root survive while the machine is held).
# Results go to $OUT as each phase ends: results.tgz (JSON, markdown, walls.txt, run.log), logs.tgz.
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/scale-out-out}
LIMIT=${LIMIT:-580}
PHASES=${PHASES:-cold-parallel warm-sequential warm-parallel}
read -r GPU_A GPU_B <<< "${GPUS:-0 1}"   # GPUS="0 0": both cells on one GPU (a smoke test on a one-GPU machine)
T0=$(date +%s)
W=${WORK:-/root/scale-out}; R=$W/results; L=$W/logs
mkdir -p "$OUT" "$R" "$L"
left() { echo $(( LIMIT - ($(date +%s) - T0) )); }
say() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$R/run.log"; }
# results.tgz: JSON, markdown, walls, cell.log of every cell; logs.tgz: every program's output (the cells' logs/ folders)
pack() {
  tar -czf "$OUT/results.tgz" --exclude=logs -C "$W" results 2>/dev/null
  (cd "$W" && find results -name logs -type d -prune -print0 | tar -czf "$OUT/logs.tgz" --null -T - logs) 2>/dev/null
}
now() { date +%s.%N; }
secs() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$2"; }

python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > "$L/setup.log" 2>&1 || say "wheel install failed (see setup.log)"
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
export CCACHE_DIR=/root/ccache CCACHE_MAXSIZE=20G
CFG=reports/scale-out/pins.yaml
P="python3 -m pinset"
CELL_PINSET=${CELL_PINSET:-$P}   # how the cells call pinset (a stand-in only to test this script without a GPU)
{ nvidia-smi; nvidia-smi --query-gpu=index,uuid,name,driver_version,compute_cap,memory.total --format=csv;
  nvcc --version; c++ --version | head -1; cmake --version | head -1; echo "ninja $(ninja --version)";
  echo "ccache: $(command -v ccache) $(ccache --version 2>/dev/null | head -1)"; python3 --version; echo "nproc $(nproc)"; } \
  > "$R/machine.txt" 2>&1
say "machine: $(nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader | tr '\n' ';') nproc=$(nproc)"

# a fresh pinset cache (what a runner's workspace starts with), holding the carried sdists (no network here)
fresh_cache() { rm -rf "$1"; mkdir -p "$1/downloads"; cp .carry/*.tar.gz "$1/downloads/"; }

# --- the workflow's jobs sim and matrix ---------------------------------------------------------------
if [ ! -s "$R/sim.json" ]; then
  fresh_cache "$W/cache-sim"
  # shellcheck disable=SC2086
  PINSET_CACHE=$W/cache-sim $P sim -c "$CFG" --json "$R/sim.json" --markdown "$R/sim.md" > "$L/sim.log" 2>&1
  say "sim exit $? ($(python3 -c 'import json,sys; print(", ".join(b["build"] + (" green" if b["ok"] else " red") for b in json.load(open(sys.argv[1]))["builds"]))' "$R/sim.json" 2>/dev/null))"
fi
# one matrix per phase: the same cells, each phase writing under its own results folder
matrix() {  # PHASE -> $R/matrix-PHASE.json
  PINSET_CACHE=$W/cache-sim $P matrix -c "$CFG" --sim "$R/sim.json" --verify-args "--op-jobs 4" \
    --pinset-command "$CELL_PINSET" --results-dir "$R/$1" --json "$R/matrix-$1.json" >> "$L/matrix.log" 2>&1
}
cell_field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["include"][int(sys.argv[2])][sys.argv[3]])' "$@"; }

# run_cell PHASE INDEX GPU CAP: the workflow's "run the cell" step, on one GPU, under a time cap; cell INDEX
# keeps its pinset cache $W/cache-cell-INDEX between phases (emptied by the cold phase)
run_cell() {
  local phase=$1 i=$2 gpu=$3 cap=$4 m="$R/matrix-$1.json" script results status=0 t0 t1
  script=$(cell_field "$m" "$i" script); results=$(cell_field "$m" "$i" results)
  mkdir -p "$results"
  if [[ $phase == cold-* ]] || [ ! -d "$W/cache-cell-$i" ]; then fresh_cache "$W/cache-cell-$i"; fi
  t0=$(now)
  while IFS= read -r command; do
    echo "+ $command" >> "$results/cell.log"
    CUDA_VISIBLE_DEVICES=$gpu PINSET_CACHE=$W/cache-cell-$i timeout -s INT -k 10 "$cap" bash -c "$command" \
      >> "$results/cell.log" 2>&1 || status=$?
  done <<< "$script"
  t1=$(now)
  echo "$phase cell $i ($(cell_field "$m" "$i" cell)) GPU $gpu exit $status wall $(secs "$t0" "$t1") s" >> "$R/walls.txt"
  say "END $phase cell $i on GPU $gpu exit $status wall $(secs "$t0" "$t1") s"
}

phase() {  # PHASE NEED_S MODE
  local name=$1 need=$2 mode=$3 cap t0 t1
  if [[ " $PHASES " != *" $name "* ]]; then return 0; fi
  if [ "$(left)" -lt "$need" ]; then say "SKIP $name: $(left) s left, needs ~$need s"; return 0; fi
  matrix "$name" || { say "matrix failed (see logs/matrix.log)"; return 1; }
  cap=$(( $(left) - 15 ))
  if [[ $name == cold-* ]]; then ccache -C > /dev/null 2>&1; fi   # cold: nothing cached at all
  ccache -z > /dev/null 2>&1
  say "START $name (cells capped at $cap s)"
  t0=$(now)
  if [ "$mode" = parallel ]; then
    run_cell "$name" 0 "$GPU_A" "$cap" & run_cell "$name" 1 "$GPU_B" "$cap" & wait
  else
    run_cell "$name" 0 "$GPU_A" "$cap"
    run_cell "$name" 1 "$GPU_B" $(( $(left) - 15 ))
  fi
  t1=$(now)
  echo "$name total wall $(secs "$t0" "$t1") s" >> "$R/walls.txt"
  ccache -s > "$R/ccache-$name.txt" 2>&1
  say "END $name wall $(secs "$t0" "$t1") s"
  # the workflow's report job: every cell's JSON, the matrix as the expected cells
  mapfile -t results < <(find "$R/$name" -name verify.json | sort)
  $P report -c "$CFG" --expect "$R/matrix-$name.json" "$R/sim.json" "${results[@]}" \
    --markdown "$R/report-$name.md" --json "$R/report-$name.json" > "$L/report-$name.log" 2>&1
  say "report $name exit $? ($(head -c 300 "$L/report-$name.log" | tr '\n' ' '))"
  pack
}

phase cold-parallel 300 parallel
phase warm-sequential 170 sequential
phase warm-parallel 90 parallel
say "done"
cat "$R/walls.txt"
pack
exit 0
