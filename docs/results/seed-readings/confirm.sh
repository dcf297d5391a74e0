#!/usr/bin/env bash
# Full runs of a screened cell (README.md, "Confirmation"): the seed-rate
# sweeps of docs/results/seed-rate under one reading, 20 steps at
# seed-400g-paper, payload-free, in shards. Each shard writes
# confirm/CELL/SWEEP/shard-K/ (results.json.gz, results.csv, table.txt,
# cpu.txt: the CPU seconds it took); `forgivectl report merge` joins a
# sweep's shards. Run from the repository's root with forgivectl on PATH:
#
#   docs/results/seed-readings/confirm.sh double-binary-tree A 1
#
# Sweeps: A, the 4:1 fabric, five policies over three seeds; B, the 4:1
# fabric, seven more policies, one seed; C, the non-blocking fabric and D,
# the 2:1 fabric, the three policies the seed compares there, one seed.
# Every shard is one run (a sweep's runs go seed by seed, policy by
# policy: A's shard 1 is dcqcn seed 1, shard 6 dcqcn seed 2), so the first
# shards of A give one seed of every policy.
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 CELL SWEEP SHARD" >&2; exit 2; }
cell=$1 sweep=$2 k=$3
declare -A cells=(
  [double-binary-tree]="--collective double-binary-tree --splits 8"
  [halving-doubling]="--collective halving-doubling"
  [direct-8x8]="--collective direct --dims 8,8"
  # The reading the seed's words and its simulator's config support
  # together (README.md, "Defaults").
  [direct-8x8-ns3-qp]="--collective direct --dims 8,8 --profile seed-400g-ns3 --flow-per-message"
  # The third of the three best cells (README.md, "Confirmation"): the
  # tree under the ns-3 DCQCN with the window seed-400g-ns3 had when it
  # was screened, one BDP for every flow.
  [double-binary-tree-ns3]="--collective double-binary-tree --splits 8 --profile docs/results/seed-readings/seed-400g-ns3-global.yaml"
)
[ -n "${cells[$cell]+x}" ] || { echo "unknown cell $cell" >&2; exit 2; }
case $sweep in
  A) fabric=leaf-spine-8x8-4to1 policies=dcqcn,shed-tight,forgive,forgive-p0,forgive-novest seeds=3 n=15 ;;
  B) fabric=leaf-spine-8x8-4to1 policies=dcqcn,shed-loose,shed-schedule,forgive-p0.25,forgive-noexempt,trim-nocc,gbn seeds=1 n=7 ;;
  C) fabric=leaf-spine-8x8-nonblocking policies=dcqcn,shed-tight,forgive seeds=1 n=3 ;;
  D) fabric=leaf-spine-8x8-2to1 policies=dcqcn,shed-tight,forgive seeds=1 n=3 ;;
  *) echo "unknown sweep $sweep: want A, B, C or D" >&2; exit 2 ;;
esac
dir=docs/results/seed-readings/confirm/$cell/$sweep/shard-$k
rm -rf "$dir"
mkdir -p "$dir"
TIMEFORMAT='%U %S'
# shellcheck disable=SC2086
{ time forgivectl lab --placement sim --topology $fabric --profile seed-400g-paper --policies $policies --seeds $seeds \
  --shard "$k/$n" --payload-free on --jobs 1 --out "$dir/out" ${cells[$cell]} > "$dir/table.txt" 2> "$dir/log.txt"; } 2> "$dir/cpu.raw"
awk '{printf "%.1f\n", $1 + $2}' "$dir/cpu.raw" > "$dir/cpu.txt" && rm "$dir/cpu.raw"
gzip -9 -c "$dir/out/results.json" > "$dir/results.json.gz"
cp "$dir/out/results.csv" "$dir/results.csv"
rm -rf "$dir/out"
