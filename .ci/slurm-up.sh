#!/bin/bash
# Single-node SLURM test cluster on localhost (Debian bookworm, root, no systemd), for the
# SLURM executor tests. Node "$(hostname -s)" with 2 fake h100 GPUs (plain files as GRES device
# files), partitions cpu (default) and gpu. Idempotent: installs slurm-wlm and munge when missing,
# (re)writes the config, starts only the daemons that are not running, and waits until the node
# is usable. Exits non-zero when the cluster does not come up. From ../shared/guides/ecosystem.md.
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then
  echo "slurm-up.sh must run as root (it installs packages and starts daemons)" >&2
  exit 1
fi
host=$(hostname -s)
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null
fi
mkdir -p /etc/slurm /var/spool/slurmd /var/spool/slurmctld /var/log/slurm /run/munge \
  /var/lib/slurm-fakegpu /etc/munge
if [ ! -s /etc/munge/munge.key ]; then
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
chown munge:munge /run/munge /etc/munge/munge.key
chmod 400 /etc/munge/munge.key
# Regular files are accepted as GRES device files (slurmd logs an error but registers the count).
touch /var/lib/slurm-fakegpu/gpu0 /var/lib/slurm-fakegpu/gpu1
mem=$(( $(awk '/MemTotal/{print int($2/1024)}' /proc/meminfo) * 8 / 10 ))
conf=$(mktemp)
cat > "$conf" <<CONF
ClusterName=local
SlurmctldHost=${host}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
GresTypes=gpu
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
MpiDefault=none
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmdSpoolDir=/var/spool/slurmd
StateSaveLocation=/var/spool/slurmctld
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
NodeName=${host} CPUs=$(nproc) RealMemory=${mem} Gres=gpu:h100:2 State=UNKNOWN
PartitionName=cpu Nodes=${host} Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=${host} MaxTime=INFINITE State=UP
CONF
changed=0
if ! cmp -s "$conf" /etc/slurm/slurm.conf; then
  mv "$conf" /etc/slurm/slurm.conf
  chmod 644 /etc/slurm/slurm.conf
  changed=1
else
  rm -f "$conf"
fi
echo "NodeName=${host} Name=gpu Type=h100 File=/var/lib/slurm-fakegpu/gpu[0-1]" > /etc/slurm/gres.conf
pgrep -x munged >/dev/null || runuser -u munge -- /usr/sbin/munged
if [ "$changed" = 1 ] && pgrep -x slurmctld >/dev/null; then
  # A running cluster with an old config: stop both daemons (scontrol shutdown stops slurmctld
  # and every slurmd), then start them on the new one below.
  scontrol shutdown >/dev/null 2>&1 || true
  for _ in $(seq 40); do
    pgrep -x slurmctld >/dev/null || pgrep -x slurmd >/dev/null || break
    sleep 0.5
  done
fi
pgrep -x slurmctld >/dev/null || /usr/sbin/slurmctld
pgrep -x slurmd >/dev/null || /usr/sbin/slurmd
state=""
for _ in $(seq 30); do
  state=$(sinfo -h -n "$host" -o %T 2>/dev/null | head -1 || true)
  case "$state" in
    idle*|mixed*|alloc*) echo "slurm up: node $host $state"; exit 0 ;;
    down*|drain*) scontrol update NodeName="$host" State=RESUME >/dev/null 2>&1 || true ;;
  esac
  sleep 1
done
echo "slurm did not come up (node state: ${state:-none}); see /var/log/slurm/" >&2
exit 1
