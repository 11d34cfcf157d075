#!/usr/bin/env bash
# ctest slurm.local_cluster: `kernelgate slurm submit` against a real one-node Slurm cluster that
# this test starts (scripts/local_slurm.sh) and stops, with two fake GPUs as GRES. The workload is
# CPU-only: `audit checker --cmd` of the relu and abs_fp32 mutants with a small shell checker
# (accepts by a checksum of the candidate, so verdicts are mixed and reproducible).
#   1. 4 shards through Slurm merge to the same verdicts and kill matrix as one unsharded run,
#      each array task with its own CUDA_VISIBLE_DEVICES;
#   2. a shard made to fail (its folder is a file) is reported missing by the merge, with its log;
#   3. a shard requeued mid-way (scontrol requeue) resumes its folder: no verdict twice, and the
#      merge again equals the unsharded run.
# Exit 77 (skipped) where Slurm or munge is not installed or we are not root.
set -uo pipefail
kg=${1:?usage: slurm_cluster.sh KERNELGATE SOURCE_DIR SCRATCH}
src=${2:?}
scratch=${3:?}
for b in /usr/sbin/slurmctld /usr/sbin/slurmd /usr/sbin/munged /usr/bin/sbatch; do
  [ -x "$b" ] || { echo "slurm test skipped: $b is missing (apt-get install slurm-wlm munge)"; exit 77; }
done
[ "$(id -u)" -eq 0 ] || { echo "slurm test skipped: the local cluster runs as root"; exit 77; }

rm -rf "$scratch" && mkdir -p "$scratch" || exit 1
# A short folder for munge's socket (a Unix socket path has at most 107 bytes).
export LOCAL_SLURM_DIR=$(mktemp -d /tmp/kg-slurm-test.XXXXXX)
export LOCAL_SLURM_GPUS=2
cleanup() {
  bash "$src/scripts/local_slurm.sh" stop >/dev/null 2>&1
  rm -rf "$LOCAL_SLURM_DIR" "$scratch"
}
trap cleanup EXIT
fail() { # what failed, then what Slurm and the shards said, so a CI log shows why
  echo "FAIL: $*"
  squeue 2>/dev/null
  for f in "$scratch"/*/slurm/*.log "$LOCAL_SLURM_DIR"/log/slurmctld.log; do
    [ -f "$f" ] && { echo "== $f"; tail -n 15 "$f"; }
  done
  exit 1
}

t0=$SECONDS
env_line=$(bash "$src/scripts/local_slurm.sh" start) ||
  env_line=$(bash "$src/scripts/local_slurm.sh" start) || fail "the local cluster did not start"
eval "$env_line"
echo "cluster up in $((SECONDS - t0)) s (SLURM_CONF=$SLURM_CONF)"

cd "$scratch" || exit 1
"$kg" mutants generate --root "$src" --kernels kernels/tasks/relu.cu \
  --kernels kernels/tasks/abs_fp32.cu --out catalog | tail -1
python3 -c '
import json, sys
for line in open("catalog/catalog.jsonl"):
    print(json.dumps({"id": json.loads(line)["id"], "status": "witnessed"}))' >witnesses.jsonl
cat >checker.sh <<'EOF'
#!/bin/sh
# {task} {candidate}: accepts a candidate whose checksum is even; slow enough to requeue mid-way.
sleep "${KG_TEST_CHECKER_SLEEP:-0}"
[ $(( $(cksum < "$2" | cut -d' ' -f1) % 2 )) -eq 0 ]
EOF
chmod +x checker.sh
audit=(audit checker --cmd "$scratch/checker.sh {task} {candidate}" --catalog catalog
       --witnesses witnesses.jsonl --root "$src" --jobs 1 --no-progress)

"$kg" "${audit[@]}" --out whole >whole.log 2>&1
[ $? -le 1 ] || { cat whole.log; fail "the unsharded audit failed"; }
calls=$(wc -l <whole/verdicts.jsonl)
echo "unsharded: $calls verdicts"

verdicts() { # FILE: "row verdict" lines, sorted
  python3 -c '
import json, sys
for r in sorted((json.loads(l)["row"], json.loads(l)["verdict"]) for l in open(sys.argv[1])):
    print(*r)' "$1"
}

# Waits until Slurm has no job of ours left (at most $1 seconds).
drain() {
  local until=$((SECONDS + $1))
  while [ -n "$(squeue -h -o %i)" ]; do
    [ $SECONDS -lt $until ] || { squeue; fail "jobs still queued after $1 s"; }
    sleep 0.2
  done
}

submit() { # OUT: prints the array job id
  "$kg" slurm submit --shards 4 --gpus-per-shard 1 -- "${audit[@]}" --out "$1" >"$1.submit" 2>&1 ||
    { cat "$1.submit"; fail "slurm submit $1"; }
  awk '/^submitted array job/ {print $4}' "$1.submit"
}

# 1. Four shards, merged.
t=$SECONDS
job=$(submit "$scratch/sharded")
echo "array job $job submitted"
drain 120
echo "4 shards and the merge ran in $((SECONDS - t)) s"
[ -f sharded/summary.json ] || { cat sharded/slurm/*.log; fail "no merged summary"; }
diff <(verdicts whole/verdicts.jsonl) <(verdicts sharded/verdicts.jsonl) >/dev/null ||
  fail "the merged verdicts differ from the unsharded run's"
cmp -s whole/kill_matrix.json sharded/kill_matrix.json || fail "the kill matrices differ"
python3 - "$scratch/sharded" <<'EOF' || fail "shard accounting"
import json, sys
d = sys.argv[1]
s = json.load(open(d + "/summary.json"))
assert s["status"] == "complete" and not s["missing"], s["missing"]
gpus = set()
for i in range(4):
    m = json.load(open(f"{d}/shards/{i}/shard.json"))
    assert m["index"] == i and m["count"] == 4
    gpus.add(m["slurm"]["CUDA_VISIBLE_DEVICES"])
    assert m["slurm"]["SLURM_ARRAY_TASK_ID"] == str(i)
assert gpus == {"0", "1"}, gpus  # two fake GPUs, one per array task
print("merged: complete; array tasks saw CUDA_VISIBLE_DEVICES", sorted(gpus))
EOF
"$kg" slurm status "$job" | head -1
"$kg" merge sharded/shards/{0,1,2,3} --logs sharded/slurm --out remerged >/dev/null 2>&1
for f in verdicts.jsonl kill_matrix.json summary.json; do
  cmp -s "sharded/$f" "remerged/$f" || { diff "sharded/$f" "remerged/$f" | head; fail "merging again changed $f"; }
done
echo "merging again: the same bytes"

# 2. Shard 2 cannot create its folder: Slurm marks it FAILED, the merge names its work missing.
mkdir -p failing/shards && : >failing/shards/2
job=$(submit "$scratch/failing")
drain 120
python3 - "$scratch/failing" <<'EOF' || fail "the failed shard is not reported"
import json, sys
d = sys.argv[1]
s = json.load(open(d + "/summary.json"))
assert s["status"] == "incomplete", s["status"]
assert s["missing"] and {m["shard"] for m in s["missing"]} == {2}, s["missing"]
shard2 = s["shards"][2]
assert shard2["state"] == "absent" and "log_tail" in shard2, shard2
assert "failing/shards/2" in shard2["log_tail"], shard2["log_tail"]
print(f"merge: {len(s['missing'])} verdicts missing, all of shard 2, with its log")
EOF
"$kg" slurm status "$job" >status.txt
[ $? -eq 1 ] || fail "slurm status should exit 1 with a failed task"
grep -q "1 failed" status.txt && grep -q "^task 2 FAILED" status.txt ||
  { cat status.txt; fail "slurm status does not name the failed task"; }
grep -q "failing/shards/2" status.txt || fail "slurm status shows no log tail"
echo "slurm status: $(head -1 status.txt)"

# 3. Shard 1 requeued after its second verdict: it resumes, no verdict twice.
export KG_TEST_CHECKER_SLEEP=1
job=$(submit "$scratch/requeued")
until=$((SECONDS + 60))
until [ "$(cat requeued/shards/1/verdicts.jsonl 2>/dev/null | wc -l)" -ge 2 ]; do
  [ $SECONDS -lt $until ] || fail "shard 1 wrote no verdicts in 60 s"
  sleep 0.1
done
scontrol requeue "${job}_1" || fail "scontrol requeue"
# A requeued job waits (Slurm sets its begin time about two minutes ahead); once it is pending
# again, let it start now.
until=$((SECONDS + 30))
until [ "$(squeue -h -j "${job}_1" -o %T 2>/dev/null)" = PENDING ]; do
  [ $SECONDS -lt $until ] || { squeue; fail "shard 1 is not pending after its requeue"; }
  sleep 0.1
done
scontrol update JobId="${job}_1" StartTime=now || fail "scontrol update StartTime"
drain 120
unset KG_TEST_CHECKER_SLEEP
grep -q "restart 1" requeued/slurm/shard-1.log || { cat requeued/slurm/shard-1.log; fail "shard 1 did not restart"; }
grep -q "resuming" requeued/slurm/shard-1.log || fail "shard 1 did not resume its folder"
python3 - "$scratch/requeued" <<'EOF' || fail "the requeued shard"
import json, sys
d = sys.argv[1]
m = json.load(open(d + "/shards/1/shard.json"))
rows = [json.loads(l)["row"] for l in open(d + "/shards/1/verdicts.jsonl")]
assert len(rows) == len(set(rows)) == len(m["assigned"]), (len(rows), len(set(rows)), len(m["assigned"]))
s = json.load(open(d + "/summary.json"))
assert s["status"] == "complete", s["missing"]
print(f"requeued shard 1: {len(rows)} verdicts, none twice")
EOF
diff <(verdicts whole/verdicts.jsonl) <(verdicts requeued/verdicts.jsonl) >/dev/null ||
  fail "after the requeue the merged verdicts differ from the unsharded run's"
echo "PASS ($((SECONDS - t0)) s)"
