#!/usr/bin/env bash
# A one-node Slurm cluster on the loopback address, for tests: munged, slurmctld and slurmd with
# everything under one folder (nothing in /etc, a private munge socket, ports of its own), fake
# GPUs as GRES so array tasks get CUDA_VISIBLE_DEVICES. Only the processes it started are
# stopped. Needs root and Debian's slurm-wlm and munge (22.05 tested).
#
#   local_slurm.sh start   starts, waits for the node to be idle, prints `export SLURM_CONF=...`
#   local_slurm.sh stop    cancels this cluster's jobs, stops its daemons (idempotent)
#   local_slurm.sh status  sinfo and squeue of this cluster
#
# Environment: LOCAL_SLURM_DIR (default /tmp/kg-slurm-$UID), LOCAL_SLURM_GPUS (fake GPUs, default
# 2; 0: no GRES), LOCAL_SLURM_CPUS (default nproc; more is allowed), LOCAL_SLURM_PORT (slurmctld's;
# slurmd's is the next one; default: the first pair from 16817 on where nothing listens), LOCAL_SLURM_WAIT (seconds to wait for idle, 30).
# The facts behind the configuration (pitfalls included) are in docs/cli.md, "Slurm".
set -euo pipefail
base=${LOCAL_SLURM_DIR:-/tmp/kg-slurm-$(id -u)}
gpus=${LOCAL_SLURM_GPUS:-2}
cpus=${LOCAL_SLURM_CPUS:-$(nproc)}
port=${LOCAL_SLURM_PORT:-}
wait_s=${LOCAL_SLURM_WAIT:-30}
conf=$base/etc/slurm.conf
pids=$base/pids
host=$(hostname -s)
sbin=/usr/sbin

say() { echo "local_slurm: $*" >&2; }

alive() { # PID COMM: running (not a zombie) and still the program we started
  local pid=$1 comm=$2 state
  [ -r "/proc/$pid/comm" ] || return 1
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$comm" ] || return 1
  state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || echo Z)
  [ "$state" != Z ]
}

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# A stopped cluster's ports can stay taken for a while (its killed daemons linger as zombies
# until PID 1 reaps them), so a new one takes the first free pair.
pick_port() {
  local p
  for ((p = 16817; p < 16917; p += 2)); do
    listening "$p" || listening $((p + 1)) || { echo "$p"; return 0; }
  done
  say "no free port pair in 16817..16916"
  return 1
}

write_config() {
  local mem
  mem=$(awk '/MemAvailable/ {printf "%d", $2 / 1024 * 0.8}' /proc/meminfo)
  mkdir -p "$base"/{etc,state,spool,log,munge,dev}
  # munged: the socket folder and those above it must be o+x, not group/world writable.
  chmod 711 "$base" "$base/munge"
  local gres="" gres_type=""
  if [ "$gpus" -gt 0 ]; then
    gres=" Gres=gpu:$gpus"
    gres_type="GresTypes=gpu"
    for ((g = 0; g < gpus; g++)); do # slurmd accepts only device files for File=
      [ -e "$base/dev/nvidia$g" ] && continue
      mknod "$base/dev/nvidia$g" c 195 "$g" 2>/dev/null || ln -sf /dev/null "$base/dev/nvidia$g"
    done
    {
      echo "AutoDetect=off"
      echo "NodeName=$host Name=gpu File=$base/dev/nvidia[0-$((gpus - 1))]"
    } >"$base/etc/gres.conf"
  fi
  cat >"$conf" <<EOF
ClusterName=kglocal
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$base/munge/munge.socket.2
SlurmctldPort=$port
SlurmdPort=$((port + 1))
StateSaveLocation=$base/state
SlurmdSpoolDir=$base/spool
SlurmctldPidFile=$base/slurmctld.pid
SlurmdPidFile=$base/slurmd.pid
SlurmctldLogFile=$base/log/slurmctld.log
SlurmdLogFile=$base/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
SchedulerType=sched/backfill
SchedulerParameters=sched_min_interval=0,batch_sched_delay=0
DependencyParameters=kill_invalid_depend
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=256
ReturnToService=2
SlurmdParameters=config_overrides
MinJobAge=600
$gres_type
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem$gres State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
}

start_daemon() { # NAME COMM ARGS...: in the background, recorded as "name pid comm"
  local name=$1 comm=$2
  shift 2
  "$@" >>"$base/log/$name.out" 2>&1 &
  echo "$name $! $comm" >>"$pids"
}

cmd_start() {
  [ "$(id -u)" -eq 0 ] || { say "needs root (SlurmUser=root)"; exit 3; }
  for b in munged slurmctld slurmd; do
    [ -x "$sbin/$b" ] || { say "$sbin/$b is missing (apt-get install slurm-wlm munge)"; exit 3; }
  done
  cmd_stop >/dev/null 2>&1 || true
  rm -rf "$base/state" "$base/spool" # a fresh cluster: job ids start at 1
  [ -n "$port" ] || port=$(pick_port) || exit 1
  write_config
  [ -s "$base/munge/munge.key" ] ||
    dd if=/dev/urandom of="$base/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$base/munge/munge.key"
  : >"$pids"
  start_daemon munged munged "$sbin/munged" -F --socket="$base/munge/munge.socket.2" \
    --key-file="$base/munge/munge.key" --log-file="$base/log/munged.log" \
    --pid-file="$base/munge/munged.pid" --seed-file="$base/munge/munged.seed"
  for _ in $(seq 50); do [ -S "$base/munge/munge.socket.2" ] && break; sleep 0.1; done
  start_daemon slurmctld slurmctld "$sbin/slurmctld" -D -f "$conf"
  start_daemon slurmd slurmd "$sbin/slurmd" -D -f "$conf" -N "$host"
  local until=$((SECONDS + wait_s))
  until SLURM_CONF=$conf timeout 5 sinfo -h -o %t 2>/dev/null | grep -qx idle; do
    sleep 0.2
    if [ $SECONDS -ge $until ]; then
      say "the node did not become idle in ${wait_s}s; the logs' ends:"
      tail -n 8 "$base"/log/*.log >&2 || true
      cmd_stop >/dev/null 2>&1 || true
      exit 1
    fi
  done
  echo "export SLURM_CONF=$conf"
}

cmd_stop() {
  [ -f "$pids" ] || return 0
  if [ -f "$conf" ]; then # slurmstepd outlives slurmd: cancel the jobs first, wait for them
    SLURM_CONF=$conf timeout 10 scancel --full --quiet --user="$(id -un)" 2>/dev/null || true
    for _ in $(seq 50); do
      [ -z "$(SLURM_CONF=$conf timeout 5 squeue -h -o %i 2>/dev/null)" ] && break
      sleep 0.1
    done
  fi
  local name pid comm
  for name in slurmd slurmctld munged; do
    while read -r n pid comm; do
      [ "$n" = "$name" ] && alive "$pid" "$comm" && kill "$pid" 2>/dev/null || true
    done <"$pids"
  done
  for _ in $(seq 50); do
    local left=0
    while read -r n pid comm; do alive "$pid" "$comm" && left=1; done <"$pids"
    [ $left -eq 0 ] && break
    sleep 0.1
  done
  while read -r n pid comm; do alive "$pid" "$comm" && kill -9 "$pid" 2>/dev/null; done <"$pids"
  rm -f "$pids"
}

cmd_status() {
  SLURM_CONF=$conf sinfo
  SLURM_CONF=$conf squeue
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
