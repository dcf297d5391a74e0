#!/usr/bin/env bash
# Submits a lab sweep to Slurm as N shards and their merge: two sbatch
# calls, a job array of N tasks (shard.sbatch, task K runs shard K/N) and
# a merge job (merge.sbatch) that runs once every task has succeeded
# (--dependency=afterok) and is cancelled if one fails. docs/cluster.md,
# "Slurm".
#
#   deploy/slurm/submit-sweep.sh N DIR LAB-FLAGS...
#
# N is the number of shards (at most the sweep's runs); DIR a directory
# on a file system every node sees: the shards write DIR/shard-K, the
# merge DIR/merged, and Slurm's logs go to DIR/slurm-JOB_TASK.out.
# LAB-FLAGS are forgivectl lab's flags but --shard, --jobs and --out.
# forgivectl is $FORGIVECTL, else the one on PATH; the jobs get the same
# one. sbatch's own options come from its environment variables
# (SBATCH_PARTITION, SBATCH_ACCOUNT, SBATCH_TIMELIMIT, ...).
# It prints the two job ids, as "array job ID" and "merge job ID" lines.
set -euo pipefail

usage() {
  echo "usage: $0 N DIR [LAB-FLAGS...]" >&2
  exit 2
}
[ $# -ge 2 ] || usage
n=$1 dir=$2
shift 2
case "$n" in
  '' | *[!0-9]* | 0*) echo "N: want a positive number of shards, not \"$n\"" >&2; exit 2 ;;
esac
for a in "$@"; do
  case "$a" in
    --shard | --shard=* | --jobs | --jobs=* | --out | --out=*)
      echo "$a: the script sets --shard, --jobs and --out itself" >&2; exit 2 ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
forgivectl=${FORGIVECTL:-forgivectl}
forgivectl=$(command -v "$forgivectl") || { echo "forgivectl: not found (set FORGIVECTL or put it on PATH)" >&2; exit 2; }
export FORGIVECTL=$forgivectl
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

# The flags, the topology, the profile and N are checked here, before
# anything is queued, with the code the shards run.
"$forgivectl" lab --dry-run "$@" --shard "$n/$n" --jobs 1 --out "$dir/shard-$n" >/dev/null

array=$(sbatch --parsable --array="1-$n" --chdir="$dir" --output="$dir/slurm-%A_%a.out" \
  "$here/shard.sbatch" "$n" "$dir" "$@")
array=${array%%;*}
echo "array job $array"
merge=$(sbatch --parsable --dependency="afterok:$array" --kill-on-invalid-dep=yes \
  --chdir="$dir" --output="$dir/slurm-%j.out" "$here/merge.sbatch" "$n" "$dir")
merge=${merge%%;*}
echo "merge job $merge"
