#!/usr/bin/env bash
# Screening cells of the seed's experiment under several readings
# (README.md, "What ran"): dcqcn and forgive over 6 steps (critical 1-3
# and 6), seed 1, at seed-400g-paper on the 4:1 fabric, payload-free. Each cell
# writes screen/CELL/ (results.json.gz, table.txt, cpu.txt: the CPU
# seconds it took). Run from the repository's root with forgivectl on
# PATH; name the cells to run, or none for all.
#
#   docs/results/seed-readings/screen.sh ring direct-8x8
set -euo pipefail
out=docs/results/seed-readings/screen
declare -A cells=(
  # The flat ring's sizes (--seed-sizes ring): the first screening cells,
  # and the factors varied around them, all at the same sizes.
  [ring]="--seed-sizes ring"
  [direct-8x8]="--collective direct --dims 8,8 --seed-sizes ring"
  [ring-8x8]="--collective ring --dims 8,8 --seed-sizes ring"
  [halving-doubling]="--collective halving-doubling --seed-sizes ring"
  [double-binary-tree]="--collective double-binary-tree --splits 8 --seed-sizes ring"
  [direct-tp8]="--collective direct --tp 8 --seed-sizes ring"
  # (committed with seed-400g-ns3 as it was before f2adc7d: one global
  # BDP window; run today it is dbt-pairwin)
  [double-binary-tree-ns3]="--collective double-binary-tree --splits 8 --profile seed-400g-ns3 --seed-sizes ring"
  [double-binary-tree-qp]="--collective double-binary-tree --splits 8 --flow-per-message --seed-sizes ring"
  [double-binary-tree-ecmp]="--collective double-binary-tree --splits 8 --flow-per-message --entropy message --seed-sizes ring"
  # Each reading at its own sizes (docs/profiles.md, "Sizes per reading").
  [double-binary-tree-own]="--collective double-binary-tree --splits 8"
  [halving-doubling-own]="--collective halving-doubling"
  [direct-tp8-own]="--collective direct --tp 8"
  [direct-8x8-own]="--collective direct --dims 8,8"
  [ring-packed-own]="--rank-placement packed"
  [double-binary-tree-packed-own]="--collective double-binary-tree --splits 8 --rank-placement packed"
  # The exempt sender's rate (README.md, "The exempt sender's rate"):
  # the double binary tree with forgive-linerate beside dcqcn; dcqcn and
  # forgive are the double-binary-tree cell's (the simulator is
  # deterministic: dcqcn here must equal dcqcn there).
  [dbt-linerate]="--collective double-binary-tree --splits 8 --seed-sizes ring"
  # The window (README.md, "The window"): seed-400g-ns3 with each host
  # pair's BDP scaled by the rate, as the ns-3 backend's queue pairs;
  # double-binary-tree-ns3 and ring-ns3, where they ran before commit
  # f2adc7d, had one 500 KB window for every flow.
  [dbt-pairwin]="--collective double-binary-tree --splits 8 --profile seed-400g-ns3 --seed-sizes ring"
  [ring-pairwin]="--profile seed-400g-ns3 --seed-sizes ring"
  # The reading the seed's words and its simulator's shipped config
  # support together (README.md, "Defaults"): seven senders into every
  # receiving link on every step (direct on [8, 8]), the ns-3 backend's
  # DCQCN and per-pair rate-scaled window (seed-400g-ns3), its queue pair
  # per message (--flow-per-message), the seed's spraying, each at its own
  # sizes; direct-8x8-pairwin-own keeps persistent flows to part the two.
  [direct-8x8-pairwin-own]="--collective direct --dims 8,8 --profile seed-400g-ns3"
  [direct-8x8-ns3-qp-own]="--collective direct --dims 8,8 --profile seed-400g-ns3 --flow-per-message"
  # NSCC's exemption that only stops cuts, beside today's ceiling, on
  # the double binary tree at seed-6.25g (a 64th of the seed's bytes and
  # rate: a cheap first look, not the seed's rate).
  [dbt-nocut-6.25g]="--collective double-binary-tree --splits 8 --profile seed-6.25g --seed-sizes ring"
)
# The policies of a cell that does not run dcqcn and forgive.
declare -A policies=(
  [dbt-linerate]="dcqcn,forgive-linerate"
  [dbt-nocut-6.25g]="nscc,forgive-nscc,forgive-nocut-nscc"
)
names=("$@")
[ ${#names[@]} -gt 0 ] || names=("${!cells[@]}")
for c in "${names[@]}"; do
  [ -n "${cells[$c]+x}" ] || { echo "unknown cell $c" >&2; exit 2; }
  pols=${policies[$c]:-dcqcn,forgive}
  dir=$out/$c
  rm -rf "$dir"
  mkdir -p "$dir"
  TIMEFORMAT='%U %S'
  # shellcheck disable=SC2086
  { time forgivectl lab --placement sim --topology leaf-spine-8x8-4to1 --profile seed-400g-paper \
    --policies "$pols" --steps 6 --payload-free on --jobs 1 --out "$dir/out" ${cells[$c]} > "$dir/table.txt" 2> "$dir/log.txt"; } 2> "$dir/cpu.raw"
  awk '{printf "%.1f\n", $1 + $2}' "$dir/cpu.raw" > "$dir/cpu.txt" && rm "$dir/cpu.raw"
  gzip -9 -c "$dir/out/results.json" > "$dir/results.json.gz"
  rm -rf "$dir/out"
done
