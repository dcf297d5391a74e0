#!/usr/bin/env bash
# CI: a real single-node Slurm from Debian's packages (munge, slurmctld,
# slurmd) on this machine alone, a simulator sweep submitted to it with
# submit-sweep.sh (a job array of 3 shards and the dependent merge), and
# the merged results compared with the same sweep run whole: equal but
# for the wall-clock fields (created, wall), the CSV and plots byte for
# byte. Everything it starts (munged, slurmctld, slurmd) lives in one
# temporary directory, on ports of its own, and is stopped at the end.
# Run as root from the repository's root: deploy/slurm/ci-test.sh
# Needs: munge slurmctld slurmd slurm-client jq (Debian 12: slurm-wlm 22.05).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="/usr/local/go/bin:$PATH"

limit=${FORGIVE_SLURM_TIMEOUT:-240} # seconds for the jobs, queued to merged
if [ "$(id -u)" != 0 ]; then
  echo "deploy/slurm/ci-test.sh: needs root (slurmd runs jobs as their user, munged as munge)" >&2
  exit 1
fi
for c in munged slurmctld slurmd sbatch squeue scontrol jq; do
  command -v "$c" >/dev/null || { echo "deploy/slurm/ci-test.sh: $c not installed (apt-get install munge slurmctld slurmd slurm-client jq)" >&2; exit 1; }
done
id munge >/dev/null 2>&1 || { echo "deploy/slurm/ci-test.sh: no munge user (the munge package makes it)" >&2; exit 1; }

t=$(mktemp -d /tmp/forgive-slurm.XXXXXX)
chmod 755 "$t"
pids=()
cleanup() {
  status=$?
  if [ -n "${SLURM_CONF:-}" ] && [ -f "$SLURM_CONF" ]; then
    scancel --quiet --user=root 2>/dev/null || true
  fi
  # Stop what this script started, by pid, newest first: slurmd,
  # slurmctld, munged.
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill -TERM "${pids[i]}" 2>/dev/null || true
    for _ in $(seq 50); do
      kill -0 "${pids[i]}" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "${pids[i]}" 2>/dev/null || true
  done
  if [ "$status" != 0 ]; then
    for f in "$t"/munge/munged.log "$t"/log/*.log "$t"/log/*.out "$t"/sweep/slurm-*.out; do
      [ -f "$f" ] && { echo "--- $f"; tail -n 30 "$f"; }
    done
  fi
  rm -rf "$t"
  exit "$status"
}
trap cleanup EXIT

# Two free TCP ports on 127.0.0.1 for slurmctld and slurmd (not Slurm's
# defaults, so a Slurm already on the machine is left alone).
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
ports=()
for p in $(seq 16817 16917); do
  port_free "$p" && ports+=("$p")
  [ ${#ports[@]} -eq 2 ] && break
done
[ ${#ports[@]} -eq 2 ] || { echo "no two free ports in 16817..16917" >&2; exit 1; }

echo "build forgivectl"
mkdir -p "$t/bin"
CGO_ENABLED=0 go build -trimpath -o "$t/bin/" ./cmd/forgivectl # as the images build it, so the build cache serves both
export FORGIVECTL="$t/bin/forgivectl"

echo "munge: a fresh key, a socket of its own"
host=$(hostname -s)
mkdir -p "$t/munge" "$t/munge-key" "$t/log" "$t/state" "$t/spool/$host" "$t/sweep"
dd if=/dev/urandom of="$t/munge-key/munge.key" bs=1024 count=1 status=none
chown -R munge:munge "$t/munge" "$t/munge-key"
chmod 755 "$t/munge" # the socket's directory: every user's job steps reach it
chmod 700 "$t/munge-key"
chmod 400 "$t/munge-key/munge.key"
setpriv --reuid=munge --regid=munge --init-groups munged --foreground --key-file="$t/munge-key/munge.key" \
  --socket="$t/munge/munge.socket" --pid-file="$t/munge/munged.pid" \
  --seed-file="$t/munge/munged.seed" --log-file="$t/munge/munged.log" >"$t/log/munged.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  [ -S "$t/munge/munge.socket" ] && break
  kill -0 "${pids[0]}" 2>/dev/null || { echo "munged exited" >&2; exit 1; }
  sleep 0.1
done
[ -S "$t/munge/munge.socket" ] || { echo "munged made no socket in 10 s" >&2; exit 1; }

export SLURM_CONF="$t/slurm.conf"
cat >"$SLURM_CONF" <<CONF
# One node, this machine, 2 CPUs; every file under $t.
ClusterName=forgive-ci
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=${ports[0]}
SlurmdPort=${ports[1]}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$t/munge/munge.socket
StateSaveLocation=$t/state
SlurmdSpoolDir=$t/spool/%n
SlurmctldPidFile=$t/slurmctld.pid
SlurmdPidFile=$t/slurmd-%n.pid
SlurmctldLogFile=$t/log/slurmctld.log
SlurmdLogFile=$t/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
MinJobAge=600
MailProg=/bin/true
NodeName=$host NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=ci Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF

echo "slurmctld and slurmd on ports ${ports[0]} and ${ports[1]}"
slurmctld -D -i -f "$SLURM_CONF" >"$t/log/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" -N "$host" >"$t/log/slurmd.out" 2>&1 &
pids+=($!)
state=
for _ in $(seq 300); do
  state=$(sinfo -h -N -n "$host" -o '%T' 2>/dev/null || true)
  case "$state" in idle*) break ;; esac
  for p in "${pids[@]}"; do
    kill -0 "$p" 2>/dev/null || { echo "a Slurm daemon (pid $p) exited" >&2; exit 1; }
  done
  sleep 0.1
done
case "$state" in idle*) echo "node $host: $state" ;; *) echo "node $host not idle after 30 s: ${state:-no answer}" >&2; exit 1 ;; esac

# 2 policies x 2 seeds on the 8-rank 4:1 leaf-spine, in the simulator:
# 4 runs, 3 shards (one holds two runs).
flags=(--placement sim --topology leaf-spine-2x4-4to1 --policies "dcqcn,forgive" --seeds 2 --steps 6 --scale 1/4)
echo "the sweep whole, without Slurm"
"$FORGIVECTL" lab "${flags[@]}" --jobs 1 --out "$t/whole" >"$t/log/whole.txt" 2>"$t/log/whole.progress"

echo "the sweep as a Slurm job array of 3 shards and a merge"
submitted=$(deploy/slurm/submit-sweep.sh 3 "$t/sweep" "${flags[@]}")
echo "$submitted"
array=$(sed -n 's/^array job \([0-9]*\)$/\1/p' <<<"$submitted")
merge=$(sed -n 's/^merge job \([0-9]*\)$/\1/p' <<<"$submitted")
if [ -z "$array" ] || [ -z "$merge" ]; then echo "submit-sweep.sh printed no job ids" >&2; exit 1; fi

job_state() { scontrol -o show job "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2 | sort -u | tr '\n' ' '; }
merged=
for _ in $(seq "$((limit * 2))"); do
  s=$(job_state "$merge")
  case "$s" in
    "COMPLETED ") merged=yes; break ;;
    PENDING* | RUNNING* | CONFIGURING* | COMPLETING* | "") ;;
    *) echo "merge job $merge: $s; shards: $(job_state "$array")" >&2; exit 1 ;;
  esac
  sleep 0.5
done
[ -n "$merged" ] || { echo "merge job $merge not done in $limit s: $(job_state "$merge"); shards: $(job_state "$array")" >&2; exit 1; }
shards=$(job_state "$array")
[ "$shards" = "COMPLETED " ] || { echo "array job $array: $shards" >&2; exit 1; }
tasks=$(scontrol -o show job "$array" | grep -c 'ArrayTaskId=')
[ "$tasks" = 3 ] || { echo "array job $array: $tasks tasks, want 3" >&2; exit 1; }
echo "array job $array: 3 tasks completed; merge job $merge completed"

m="$t/sweep/merged"
for k in 1 2 3; do
  jq -e --arg k "$k" '.sweep.shard.index == ($k | tonumber) and .sweep.shard.count == 3' \
    "$t/sweep/shard-$k/results.json" >/dev/null || { echo "shard-$k/results.json is not shard $k/3" >&2; exit 1; }
done
jq -e '(.runs | length) == 4 and .sweep.shard == null and all(.runs[];
  .budget_invariant_held and .nongradient_bytes_exact and .gradient_sums_exact)' "$m/results.json" >/dev/null || {
  echo "$m/results.json: not 4 runs, or an invariant or exactness check failed" >&2; exit 1; }
# The merge equals the whole but for the wall-clock fields, as
# lab.TestSweepShardsMergeToTheWhole compares them.
if ! diff <(jq -S 'del(.created, .wall)' "$t/whole/results.json") <(jq -S 'del(.created, .wall)' "$m/results.json") >"$t/log/diff.txt"; then
  echo "the merged results.json differs from the whole sweep's:" >&2; head -n 40 "$t/log/diff.txt" >&2; exit 1
fi
plots=$(cd "$t/whole" && ls -- *.png)
[ -n "$plots" ] || { echo "the whole sweep wrote no plots" >&2; exit 1; }
for g in results.csv $plots; do
  cmp "$t/whole/$g" "$m/$g" || { echo "$g: the whole sweep's and the merge's differ" >&2; exit 1; }
done
# The tables, without the last line (which names the directory).
sed -n '/^profile/,$p' "$t/log/whole.txt" | grep -v ' in /' | grep -v '^sweep ' >"$t/log/whole-table.txt"
sed -n '/^profile/,$p' "$t/sweep/slurm-$merge.out" | grep -v ' in /' | grep -v '^sweep ' >"$t/log/merged-table.txt"
diff "$t/log/whole-table.txt" "$t/log/merged-table.txt" >/dev/null || { echo "the merge job printed another table than the whole sweep:" >&2; diff "$t/log/whole-table.txt" "$t/log/merged-table.txt" >&2; exit 1; }
echo "merged: 4 runs from 3 shards, equal to the whole sweep but for created and wall; CSV, $(wc -w <<<"$plots") plots and the table byte for byte"
