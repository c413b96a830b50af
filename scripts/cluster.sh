#!/usr/bin/env bash
# cluster.sh - a cluster of N nodes on one machine, for multi-node tests and benches.
#
# Each node is a network namespace with its own address on a private bridge, and
# every process Open MPI starts there also gets its own hostname (unshare --uts)
# and its own /dev/shm (unshare --mount + a tmpfs): Open MPI then sees N machines,
# uses shared memory (vader) inside a node and TCP between nodes. Nodes sharing
# one hostname or one /dev/shm make vader's segments collide (a segfault).
# mpirun itself runs in the root namespace, which holds the bridge's first
# address; its daemons (orted) are started inside the nodes by the rsh agent
# this script writes.
#
#   cluster.sh check                 exit 0 where namespaces can be made here, else
#                                    77 with "UNSUPPORTED: <reason>"
#   cluster.sh up N [--slots S|S1,S2,...] [--rate RATE] [--delay DELAY] [--state DIR]
#                                    makes the nodes; prints the state directory
#                                    (default: a new temporary one); --rate and
#                                    --delay shape every node's link (tc netem on
#                                    its interface: what it sends, e.g. 1gbit, 1ms)
#   cluster.sh flags DIR             the mpirun flags that run on the cluster
#   cluster.sh status DIR            the nodes, addresses, slots and link counters
#   cluster.sh down DIR              removes the nodes, the bridge and DIR
#
# The names (namespaces, bridge, links, hostnames) carry a random id, and the
# subnet (10.77.X.0/24) is the first one no interface here uses, chosen under a
# lock: clusters of concurrent tests do not meet. `up` removes what it made if it
# fails; `down` is safe to repeat.
#
# Example:
#   dir=$(scripts/cluster.sh up 2 --slots 2 --rate 1gbit --delay 1ms)
#   mpirun $(scripts/cluster.sh flags "$dir") -np 4 zero-run model.zrt ...
#   scripts/cluster.sh down "$dir"
set -Eeuo pipefail

UNSUPPORTED=77
SUBNET_PREFIX=10.77
# mpirun's flags for a job that must end when a node is lost (docs/training.md).
KEEPALIVE_FLAGS="--mca oob_tcp_keepalive_time 5 --mca oob_tcp_keepalive_intvl 2 --mca oob_tcp_keepalive_probes 4"
# One lock for every cluster of this machine, whatever TMPDIR each caller has.
LOCK=/tmp/zero-cluster.lock

die() { echo "cluster.sh: $*" >&2; exit 1; }

usage() {
  sed -n '/^#   cluster.sh check/,/^# The names/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}

# Prints why this machine cannot make namespaces (nothing where it can).
unsupported_reason() {
  if [ "$(id -u)" != 0 ]; then echo "not root (network namespaces need CAP_NET_ADMIN)"; return; fi
  for tool in ip unshare tc mpirun orted; do
    command -v "$tool" >/dev/null || { echo "$tool not found"; return; }
  done
  local probe="zcprobe$$"
  if ! ip netns add "$probe" 2>/dev/null; then
    echo "ip netns add is not permitted here"; return
  fi
  # What the rsh agent does for every node.
  if ! ip netns exec "$probe" unshare --uts --mount --propagation private \
      sh -c "hostname $probe && mount -t tmpfs tmpfs /dev/shm" 2>/dev/null; then
    ip netns del "$probe" 2>/dev/null || true
    echo "a hostname and a /dev/shm tmpfs of its own (unshare --uts --mount) are not" \
      "permitted inside a network namespace"; return
  fi
  ip netns del "$probe"
  if ! ip link add "${probe}b" type bridge 2>/dev/null; then
    echo "ip link add type bridge is not permitted here"; return
  fi
  ip link del "${probe}b"
}

cmd_check() {
  local why
  why=$(unsupported_reason)
  if [ -n "$why" ]; then echo "UNSUPPORTED: $why"; exit $UNSUPPORTED; fi
  echo "ok"
}

# The first 10.77.X.0/24 (X in 1..254) that no interface of this namespace has.
free_subnet() {
  local used x
  used=$(ip -o -4 addr show | awk '{print $4}')
  for x in $(seq 1 254); do
    if ! grep -q "^${SUBNET_PREFIX}\.${x}\." <<<"$used"; then echo "$x"; return; fi
  done
  die "no free subnet ${SUBNET_PREFIX}.X.0/24 left (clusters not brought down?)"
}

# Writes the rsh agent Open MPI calls as `AGENT [-options] HOST COMMAND...`: it
# runs COMMAND (a shell line: Open MPI quotes it for a remote shell) inside HOST's
# namespace with HOST as its hostname and a /dev/shm of its own.
write_agent() {
  local dir=$1
  cat >"$dir/rsh-agent" <<'EOF'
#!/bin/sh
# Open MPI's rsh agent for the nodes of scripts/cluster.sh (written by it).
while [ $# -gt 0 ]; do
  case "$1" in -*) shift ;; *) break ;; esac
done
node=$1; shift
exec ip netns exec "$node" unshare --uts --mount --propagation private \
  sh -c 'hostname "$1" && mount -t tmpfs -o mode=1777 tmpfs /dev/shm && exec sh -c "$2"' \
  rsh-agent "$node" "$*"
EOF
  chmod +x "$dir/rsh-agent"
}

# Slots per node from --slots: one count for all nodes, or one per node.
slots_list() {
  local n=$1 spec=$2 i
  local -a s
  IFS=, read -r -a s <<<"$spec"
  if [ ${#s[@]} -eq 1 ]; then
    for ((i = 0; i < n; i++)); do echo "${s[0]}"; done
  elif [ ${#s[@]} -eq "$n" ]; then
    printf '%s\n' "${s[@]}"
  else
    die "--slots $spec: give one count or $n (one per node)"
  fi
}

# Adds node I (namespace NS, address ADDR/24) to the bridge, shaping its link.
add_node() {
  local ns=$1 veth=$2 addr=$3 bridge=$4 rate=$5 delay=$6
  ip netns add "$ns"
  echo "netns $ns" >>"$STATE/made"
  ip link add "$veth" type veth peer name eth0 netns "$ns"
  ip link set "$veth" master "$bridge" up
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "$addr/24" dev eth0
  ip -n "$ns" link set eth0 up
  shape_link "$ns" "$rate" "$delay"
}

# Shapes what node NS sends (every packet between two nodes passes one such
# link): netem for a delay (with its rate), else htb for a rate alone (netem is
# not in every kernel).
shape_link() {
  local ns=$1 rate=$2 delay=$3
  if [ -n "$delay" ]; then
    tc -n "$ns" qdisc add dev eth0 root netem delay "$delay" ${rate:+rate "$rate"} limit 100000 ||
      die "--delay $delay: tc netem failed (is the sch_netem module in this kernel?); drop --delay or load it"
  elif [ -n "$rate" ]; then
    tc -n "$ns" qdisc add dev eth0 root handle 1: htb default 1
    tc -n "$ns" class add dev eth0 parent 1: classid 1:1 htb rate "$rate" quantum 60000
  fi
}

# Removes what the state file $1/made lists (namespaces, then the bridge).
teardown() {
  local dir=$1 kind name pid
  [ -f "$dir/made" ] || return 0
  while read -r kind name; do
    case "$kind" in
      netns)
        # Open MPI's daemons of a job that did not end: they are this cluster's.
        for pid in $(ip netns pids "$name" 2>/dev/null); do kill "$pid" 2>/dev/null || true; done
        ip netns del "$name" 2>/dev/null || true ;;
    esac
  done <"$dir/made"
  while read -r kind name; do
    if [ "$kind" = bridge ]; then ip link del "$name" 2>/dev/null || true; fi
  done <"$dir/made"
  rm -f "$dir/made"
}

cmd_up() {
  [ $# -ge 1 ] || usage
  local n=$1; shift
  [[ "$n" =~ ^[1-9][0-9]?$ ]] || die "up: N must be a node count (1-99), got '$n'"
  local slots=1 rate="" delay="" state=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --slots) slots=${2:?--slots needs a value}; shift 2 ;;
      --rate) rate=${2:?--rate needs a value}; shift 2 ;;
      --delay) delay=${2:?--delay needs a value}; shift 2 ;;
      --state) state=${2:?--state needs a directory}; shift 2 ;;
      *) die "up: unknown option '$1'" ;;
    esac
  done
  local why
  why=$(unsupported_reason)
  [ -z "$why" ] || { echo "UNSUPPORTED: $why" >&2; exit $UNSUPPORTED; }
  local -a per_node
  local listed
  listed=$(slots_list "$n" "$slots")
  mapfile -t per_node <<<"$listed"
  for s in "${per_node[@]}"; do [[ "$s" =~ ^[1-9][0-9]*$ ]] || die "--slots: '$s' is not a count"; done
  if [ -z "$state" ]; then
    state=$(mktemp -d "${TMPDIR:-/tmp}/zero-cluster.XXXXXX")
  else
    mkdir -p "$state"
    [ ! -e "$state/made" ] || die "$state already holds a cluster: bring it down first"
  fi
  STATE=$(cd "$state" && pwd)
  local id
  id=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
  trap 'cmd_down "$STATE"' EXIT
  trap 'exit 1' INT TERM
  : >"$STATE/made"
  local x bridge="zc${id}b"
  exec 9>"$LOCK"
  flock 9
  x=$(free_subnet)
  ip link add "$bridge" type bridge
  echo "bridge $bridge" >>"$STATE/made"
  ip addr add "${SUBNET_PREFIX}.${x}.1/24" dev "$bridge"
  ip link set "$bridge" up
  flock -u 9
  : >"$STATE/hostfile"
  : >"$STATE/nodes"
  local i ns addr
  for i in $(seq 0 $((n - 1))); do
    ns="zc${id}n${i}"
    addr="${SUBNET_PREFIX}.${x}.$((10 + i))"
    add_node "$ns" "zc${id}v${i}" "$addr" "$bridge" "$rate" "$delay"
    echo "$ns slots=${per_node[$i]}" >>"$STATE/hostfile"
    echo "$ns $addr ${per_node[$i]}" >>"$STATE/nodes"
  done
  write_agent "$STATE"
  echo "${SUBNET_PREFIX}.${x}.0/24" >"$STATE/subnet"
  printf '%s\n' "${rate:-unshaped}" "${delay:-0}" >"$STATE/link"
  trap - EXIT INT TERM
  echo "$STATE"
}

state_dir() {
  [ $# -eq 1 ] || usage
  [ -f "$1/subnet" ] || die "$1 is not a cluster's state directory (no subnet file)"
  cd "$1" && pwd
}

cmd_flags() {
  local dir subnet
  dir=$(state_dir "$@")
  subnet=$(cat "$dir/subnet")
  # No tree spawn: every daemon is started from here, through the agent.
  # The keepalive of the daemons' links (6-13 s instead of Open MPI's 300-480)
  # lets mpirun notice a lost node before zero-run's --timeout ends the ranks
  # (docs/training.md, "When a node is lost").
  echo "--hostfile $dir/hostfile --mca plm_rsh_agent $dir/rsh-agent" \
    "--mca plm_rsh_no_tree_spawn 1 --mca btl self,vader,tcp" \
    "--mca btl_tcp_if_include $subnet --mca oob_tcp_if_include $subnet" \
    "$KEEPALIVE_FLAGS"
}

cmd_status() {
  local dir ns addr slots
  dir=$(state_dir "$@")
  echo "subnet $(cat "$dir/subnet"), link $(paste -sd' ' "$dir/link")"
  while read -r ns addr slots; do
    echo "$ns $addr slots=$slots $(stat_bytes "$ns")"
  done <"$dir/nodes"
}

# "sent B received B": the node's interface counters.
stat_bytes() {
  local tx rx
  tx=$(ip netns exec "$1" cat /sys/class/net/eth0/statistics/tx_bytes 2>/dev/null || echo ?)
  rx=$(ip netns exec "$1" cat /sys/class/net/eth0/statistics/rx_bytes 2>/dev/null || echo ?)
  echo "sent $tx received $rx"
}

cmd_down() {
  local dir
  [ $# -eq 1 ] || usage
  dir=$1
  [ -d "$dir" ] || return 0
  teardown "$dir"
  rm -f "$dir/hostfile" "$dir/nodes" "$dir/rsh-agent" "$dir/subnet" "$dir/link" "$dir/made"
  rmdir "$dir" 2>/dev/null || true
}

[ $# -ge 1 ] || usage
command=$1; shift
case "$command" in
  check) cmd_check "$@" ;;
  up) cmd_up "$@" ;;
  flags) cmd_flags "$@" ;;
  status) cmd_status "$@" ;;
  down) cmd_down "$@" ;;
  *) usage ;;
esac
