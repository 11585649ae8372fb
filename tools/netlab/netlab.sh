#!/usr/bin/env bash
# netlab.sh -- a cluster in a box: H "hosts" (network namespaces) on one switch (a bridge),
# every host link shaped to a given rate in both directions with tc tbf. With --dc-b K, two
# datacenters: the last K hosts on a second switch, joined to the first by one WAN link
# shaped to --wan-rate (default R/5), whose kernel byte counters say what crossed.
#
#   netlab.sh up    --hosts H --rate R [--prefix P] [--subnet A.B.C] [--burst B] [--latency L]
#                   [--dc-b K [--wan-rate W]]
#   netlab.sh down  --prefix P
#   netlab.sh run   --hosts H --rate R [--timeout S] [up options] -- CMD...   (CMD once, root ns)
#   netlab.sh each  --hosts H --rate R [--timeout S] [up options] -- CMD...   (CMD in every host)
#   netlab.sh exec  [--prefix P] [--timeout S] I [--timeout S] -- CMD...        (CMD in host I)
#   netlab.sh list
#
# See docs/netlab.md. Exits 77 when not root or when ip/tc/timeout are missing.
set -euo pipefail

NETLAB_SELF_PATH=$(readlink -f "${BASH_SOURCE[0]}")
STATE_DIR=${NETLAB_STATE_DIR:-/run/netlab}
readonly NETLAB_SELF_PATH STATE_DIR
readonly MAX_HOSTS=64          # keeps interface names <= 15 chars and the /24 roomy
readonly UCX_TLS_HINT="tcp,self"  # namespaces do not isolate shared memory: force the network

OWNED=0   # set once this process has claimed PREFIX: only then may a trap remove it

# Options (set by parse_opts).
HOSTS="" RATE="" PREFIX="" SUBNET="" BURST="256kb" LATENCY="50ms" TIMEOUT=600 DC_B=0 WAN_RATE=""
ARGS=()

usage() {
  sed -n '2,12s/^# \{0,1\}//p' "$NETLAB_SELF_PATH" >&2
  exit 2
}
die() { echo "netlab: $*" >&2; exit 2; }
log() { [[ -n ${NETLAB_QUIET:-} ]] || echo "netlab: $*" >&2; }

require_root() {
  local t
  for t in ip tc timeout flock; do
    command -v "$t" >/dev/null 2>&1 || { echo "netlab: needs root (and ip/tc): '$t' not found" >&2; exit 77; }
  done
  if [[ $(id -u) -ne 0 ]]; then
    echo "netlab: needs root (and ip/tc)" >&2
    exit 77
  fi
}

parse_opts() {
  while [[ $# -gt 0 ]]; do
    case $1 in
      --hosts)   HOSTS=${2:?}; shift 2 ;;
      --rate)    RATE=${2:?}; shift 2 ;;
      --prefix)  PREFIX=${2:?}; shift 2 ;;
      --subnet)  SUBNET=${2:?}; shift 2 ;;
      --burst)   BURST=${2:?}; shift 2 ;;
      --latency) LATENCY=${2:?}; shift 2 ;;
      --timeout) TIMEOUT=${2:?}; shift 2 ;;
      --dc-b)    DC_B=${2:?}; shift 2 ;;
      --wan-rate) WAN_RATE=${2:?}; shift 2 ;;
      --)        shift; ARGS=("$@"); return ;;
      -h|--help) usage ;;
      -*)        die "unknown option '$1'" ;;
      *)         ARGS=("$@"); return ;;
    esac
  done
}

check_prefix() {
  [[ $PREFIX =~ ^[a-z][a-z0-9]{0,9}$ ]] ||
    die "prefix '$PREFIX' must be 1-10 chars of [a-z0-9], starting with a letter"
}

check_lab_opts() {
  if ! [[ $HOSTS =~ ^[0-9]+$ ]] || ((HOSTS < 1 || HOSTS > MAX_HOSTS)); then
    die "--hosts must be 1..$MAX_HOSTS"
  fi
  [[ -n $RATE ]] || die "--rate is required (e.g. 1gbit, 100mbit)"
  rate_bits_per_s "$RATE" >/dev/null || die "cannot parse --rate '$RATE' (use e.g. 1gbit, 500mbit)"
  [[ $TIMEOUT =~ ^[0-9]+$ ]] || die "--timeout must be whole seconds"
  if ! [[ $DC_B =~ ^[0-9]+$ ]] || ((DC_B >= HOSTS)); then
    die "--dc-b must be 0..$((HOSTS - 1)) (hosts in the second datacenter; at least one stays in the first)"
  fi
  if ((DC_B > 0)); then
    [[ -n $WAN_RATE ]] || WAN_RATE="$(($(rate_bits_per_s "$RATE") / 5))bit"
    rate_bits_per_s "$WAN_RATE" >/dev/null || die "cannot parse --wan-rate '$WAN_RATE'"
  elif [[ -n $WAN_RATE ]]; then
    die "--wan-rate needs --dc-b"
  fi
  if [[ -n $SUBNET ]]; then
    [[ $SUBNET =~ ^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})$ ]] ||
      die "--subnet takes three octets, e.g. 10.201.0"
  fi
  [[ -n $PREFIX ]] || PREFIX="thl$$"
  check_prefix
}

# tc rate syntax -> bits per second (tc: bit/kbit/mbit/gbit are SI bits, bps/kbps/... bytes).
rate_bits_per_s() {
  local re='^([0-9]+(\.[0-9]+)?)(bit|kbit|mbit|gbit|tbit|bps|kbps|mbps|gbps|tbps)?$'
  [[ ${1,,} =~ $re ]] || return 1
  local num=${BASH_REMATCH[1]} unit=${BASH_REMATCH[3]:-bit}
  local mult
  case $unit in
    bit) mult=1 ;; kbit) mult=1e3 ;; mbit) mult=1e6 ;; gbit) mult=1e9 ;; tbit) mult=1e12 ;;
    bps) mult=8 ;; kbps) mult=8e3 ;; mbps) mult=8e6 ;; gbps) mult=8e9 ;; tbps) mult=8e12 ;;
  esac
  awk -v n="$num" -v m="$mult" 'BEGIN { printf "%.0f\n", n * m }'
}

ns_of()  { echo "${PREFIX}h$1"; }   # namespace of host i
dc_of()  { if (($1 >= HOSTS - DC_B)); then echo b; else echo a; fi; }  # its datacenter
bridge_of() { if [[ $(dc_of "$1") == b ]]; then echo "${PREFIX}bb"; else echo "${PREFIX}br"; fi; }
dev_of() { echo "${PREFIX}h$1"; }   # host-side veth (inside the namespace)
port_of() { echo "${PREFIX}s$1"; }  # switch-side veth (bridge port, root namespace)
env_file() { echo "$STATE_DIR/$PREFIX.env"; }

subnet_in_use() {
  ip -4 -o addr show | grep -qF " inet $1." && return 0
  ip -4 route show | grep -qF "$1.0/24" && return 0
  return 1
}

pick_subnet() {
  local x
  for x in $(seq 0 255); do
    subnet_in_use "10.201.$x" || { echo "10.201.$x"; return 0; }
  done
  return 1
}

# The lab's description, as shell assignments (written to the env file and exported by run).
write_env() {
  local i rate_bps
  rate_bps=$(rate_bits_per_s "$RATE")
  {
    echo "NETLAB_PREFIX=$PREFIX"
    echo "NETLAB_HOSTS=$HOSTS"
    echo "NETLAB_RATE=$RATE"
    echo "NETLAB_RATE_BPS=$rate_bps"
    echo "NETLAB_SUBNET=$SUBNET"
    echo "NETLAB_CIDR=$SUBNET.0/24"
    echo "NETLAB_BRIDGE=${PREFIX}br"
    echo "NETLAB_BRIDGE_IP=$SUBNET.254"
    echo "NETLAB_UCX_TLS=$UCX_TLS_HINT"
    echo "NETLAB_SELF=$NETLAB_SELF_PATH"
    echo "NETLAB_DC_B=$DC_B"
    if ((DC_B > 0)); then
      echo "NETLAB_WAN_RATE=$WAN_RATE"
      echo "NETLAB_WAN_RATE_BPS=$(rate_bits_per_s "$WAN_RATE")"
      echo "NETLAB_WAN_DEV=${PREFIX}wa"   # on switch a: tx = bytes a -> b, rx = b -> a
    fi
    for ((i = 0; i < HOSTS; i++)); do
      echo "NETLAB_DC_$i=$(dc_of "$i")"
      echo "NETLAB_NS_$i=$(ns_of "$i")"
      echo "NETLAB_IP_$i=$SUBNET.$((i + 1))"
      echo "NETLAB_DEV_$i=$(dev_of "$i")"
    done
  } >"$(env_file)"
}

load_env() {
  local f
  f=$(env_file)
  [[ -r $f ]] || die "no lab with prefix '$PREFIX' ($f missing)"
  set -a
  # shellcheck disable=SC1090
  source "$f"
  set +a
  HOSTS=$NETLAB_HOSTS RATE=$NETLAB_RATE SUBNET=$NETLAB_SUBNET DC_B=${NETLAB_DC_B:-0}
}

shape() {  # shape DEV [NS [RATE]]: tbf root qdisc on DEV (inside NS when given)
  local dev=$1 ns=${2:-} rate=${3:-$RATE}
  local nsarg=()
  [[ -n $ns ]] && nsarg=(-n "$ns")
  tc "${nsarg[@]}" qdisc add dev "$dev" root tbf rate "$rate" burst "$BURST" latency "$LATENCY"
}

lab_up() {
  mkdir -p "$STATE_DIR"
  local lockfd i ns dev port
  exec {lockfd}>"$STATE_DIR/lock"
  flock -w 60 "$lockfd" || die "could not take $STATE_DIR/lock"
  if ip link show "${PREFIX}br" >/dev/null 2>&1 || [[ -e $(env_file) ]] ||
     ip netns list | grep -q "^${PREFIX}h[0-9]"; then
    die "prefix '$PREFIX' is already in use (netlab.sh down --prefix $PREFIX)"
  fi
  if [[ -z $SUBNET ]]; then
    SUBNET=$(pick_subnet) || die "no free 10.201.X.0/24 subnet"
  elif subnet_in_use "$SUBNET"; then
    die "subnet $SUBNET.0/24 is already in use in the root namespace"
  fi
  OWNED=1
  write_env   # first, so that down finds what to remove even if up fails half way

  ip link add "${PREFIX}br" type bridge stp_state 0 forward_delay 0
  ip link set "${PREFIX}br" addrgenmode none 2>/dev/null || true
  ip addr add "$SUBNET.254/24" dev "${PREFIX}br"   # root ns on the switch: PMIx, mpirun
  ip link set "${PREFIX}br" up
  if ((DC_B > 0)); then
    # The second datacenter's switch, and the WAN link between the two (shaped both ways).
    ip link add "${PREFIX}bb" type bridge stp_state 0 forward_delay 0
    ip link set "${PREFIX}bb" addrgenmode none 2>/dev/null || true
    ip link set "${PREFIX}bb" up
    ip link add "${PREFIX}wa" type veth peer name "${PREFIX}wb"
    ip link set "${PREFIX}wa" addrgenmode none 2>/dev/null || true
    ip link set "${PREFIX}wb" addrgenmode none 2>/dev/null || true
    ip link set "${PREFIX}wa" master "${PREFIX}br"
    ip link set "${PREFIX}wb" master "${PREFIX}bb"
    ip link set "${PREFIX}wa" up
    ip link set "${PREFIX}wb" up
    shape "${PREFIX}wa" "" "$WAN_RATE"   # a -> b
    shape "${PREFIX}wb" "" "$WAN_RATE"   # b -> a
  fi
  for ((i = 0; i < HOSTS; i++)); do
    ns=$(ns_of "$i") dev=$(dev_of "$i") port=$(port_of "$i")
    ip netns add "$ns"
    ip link add "$dev" type veth peer name "$port"
    ip link set "$dev" netns "$ns"
    ip link set "$port" addrgenmode none 2>/dev/null || true
    ip link set "$port" master "$(bridge_of "$i")"
    ip link set "$port" up
    ip -n "$ns" link set lo up
    ip -n "$ns" link set "$dev" addrgenmode none 2>/dev/null || true
    ip -n "$ns" addr add "$SUBNET.$((i + 1))/24" dev "$dev"
    ip -n "$ns" link set "$dev" up
    shape "$dev" "$ns"   # host -> switch
    shape "$port"        # switch -> host
  done
  exec {lockfd}>&-
  log "up: prefix $PREFIX, $HOSTS hosts on $SUBNET.0/24, every link $RATE both ways"
  ((DC_B == 0)) || log "two datacenters: hosts $((HOSTS - DC_B))..$((HOSTS - 1)) on switch b, WAN link ${PREFIX}wa-${PREFIX}wb at $WAN_RATE both ways"
}

cleanup_owned() { ((OWNED)) && lab_down; return 0; }

# Remove everything carrying PREFIX. Never fails: it runs from traps.
lab_down() {
  set +e
  local ns dev tries
  local -a pids
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${PREFIX}h[0-9]+$"); do
    # Processes left in a namespace keep it (and its veth) alive: end them first.
    mapfile -t pids < <(ip netns pids "$ns" 2>/dev/null)
    if ((${#pids[@]} > 0)); then
      kill -TERM "${pids[@]}" 2>/dev/null
      for ((tries = 0; tries < 20; tries++)); do
        [[ -z $(ip netns pids "$ns" 2>/dev/null) ]] && break
        sleep 0.1
      done
      mapfile -t pids < <(ip netns pids "$ns" 2>/dev/null)
      ((${#pids[@]} > 0)) && kill -KILL "${pids[@]}" 2>/dev/null
    fi
    ip netns del "$ns" 2>/dev/null
  done
  for dev in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' |
               grep -E "^${PREFIX}(br|bb|wa|wb|s[0-9]+|h[0-9]+)$"); do
    ip link del "$dev" 2>/dev/null
  done
  rm -f "$(env_file)"
  log "down: prefix $PREFIX removed"
  set -e
}

leftovers() {  # prints what still carries PREFIX (empty when clean)
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${PREFIX}h[0-9]+$" || true
  ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' |
    grep -E "^${PREFIX}(br|bb|wa|wb|s[0-9]+|h[0-9]+)$" || true
}

# ---- run / each: the lab lives exactly as long as this process ---------------------------
CHILDREN=()

stop_children() {
  local p
  for p in "${CHILDREN[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${CHILDREN[@]}"; do wait "$p" 2>/dev/null || true; done
  CHILDREN=()
}

on_signal() {  # $1: exit status to report (130 INT, 143 TERM)
  trap - INT TERM
  echo "netlab: interrupted, stopping and cleaning up" >&2
  stop_children
  exit "$1"
}

arm_cleanup() {
  trap 'cleanup_owned' EXIT
  trap 'on_signal 130' INT
  trap 'on_signal 143' TERM
  trap 'on_signal 129' HUP
}

host_env() {  # host_env I: the per-host environment, as env(1) assignments
  local dev
  dev=$(dev_of "$1")
  echo "NETLAB_RANK=$1" "NETLAB_NS=$(ns_of "$1")" "NETLAB_DEV=$dev" "NETLAB_DC=$(dc_of "$1")" \
       "NETLAB_IP=$SUBNET.$(($1 + 1))" "UCX_TLS=$UCX_TLS_HINT" "UCX_NET_DEVICES=$dev"
}

cmd_run() {
  parse_opts "$@"; check_lab_opts; require_root
  [[ ${#ARGS[@]} -gt 0 ]] || die "run: no command given (netlab.sh run ... -- CMD)"
  arm_cleanup
  lab_up
  load_env
  local rc=0
  # timeout puts CMD in its own process group; the traps above forward INT/TERM to it.
  timeout --kill-after=10 "$TIMEOUT" "${ARGS[@]}" &
  CHILDREN=($!)
  wait "${CHILDREN[0]}" || rc=$?
  CHILDREN=()
  ((rc == 124)) && echo "netlab: command timed out after ${TIMEOUT}s" >&2
  return "$rc"
}

cmd_each() {
  parse_opts "$@"; check_lab_opts; require_root
  [[ ${#ARGS[@]} -gt 0 ]] || die "each: no command given (netlab.sh each ... -- CMD)"
  arm_cleanup
  lab_up
  load_env
  local i rc=0 r done_pid
  local -A rank_of=()
  for ((i = 0; i < HOSTS; i++)); do
    # shellcheck disable=SC2046
    timeout --kill-after=10 "$TIMEOUT" ip netns exec "$(ns_of "$i")" \
      env $(host_env "$i") "${ARGS[@]}" &
    CHILDREN+=($!)
    rank_of[$!]=$i
  done
  # Wait for all; on the first failure stop the others (a peer would wait for it forever).
  local pending=("${CHILDREN[@]}") p
  while ((${#pending[@]} > 0)); do
    r=0
    wait -n -p done_pid "${pending[@]}" || r=$?
    [[ -n ${done_pid:-} ]] || break   # nothing left to wait for
    local rest=()
    for p in "${pending[@]}"; do [[ $p == "$done_pid" ]] || rest+=("$p"); done
    pending=("${rest[@]}")
    if ((r != 0 && rc == 0)); then
      rc=$r
      echo "netlab: host ${rank_of[$done_pid]} exited with $r; stopping the others" >&2
      for p in "${pending[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    fi
  done
  CHILDREN=()
  return "$rc"
}

cmd_up() {
  parse_opts "$@"; check_lab_opts; require_root
  trap 'cleanup_owned' EXIT   # undo a half-built lab
  trap 'exit 130' INT; trap 'exit 143' TERM
  lab_up
  trap - EXIT INT TERM
  cat "$(env_file)"
}

cmd_down() {
  parse_opts "$@"
  [[ -n $PREFIX ]] || die "down: --prefix is required"
  check_prefix; require_root
  lab_down
  local left
  left=$(leftovers)
  [[ -z $left ]] || { echo "netlab: left behind: $left" >&2; return 1; }
}

cmd_exec() {
  parse_opts "$@"
  PREFIX=${PREFIX:-${NETLAB_PREFIX:-}}
  [[ -n $PREFIX ]] || die "exec: --prefix or NETLAB_PREFIX is required"
  check_prefix; require_root
  [[ ${#ARGS[@]} -ge 1 && ${ARGS[0]} =~ ^[0-9]+$ ]] || die "exec: usage: exec [--prefix P] I -- CMD..."
  local i=${ARGS[0]}
  local rest=("${ARGS[@]:1}")
  ARGS=()
  parse_opts "${rest[@]}"   # options may also follow I (exec 1 --timeout 30 -- CMD)
  [[ ${#ARGS[@]} -gt 0 ]] || die "exec: no command given"
  load_env
  ((i < HOSTS)) || die "exec: host $i does not exist (lab has $HOSTS)"
  # shellcheck disable=SC2046
  exec timeout --foreground --kill-after=10 "$TIMEOUT" ip netns exec "$(ns_of "$i")" \
    env $(host_env "$i") "${ARGS[@]}"
}

cmd_list() {
  [[ -d $STATE_DIR ]] || return 0
  local f
  for f in "$STATE_DIR"/*.env; do
    [[ -e $f ]] || continue
    # shellcheck disable=SC1090
    (source "$f"; echo "$NETLAB_PREFIX hosts=$NETLAB_HOSTS rate=$NETLAB_RATE subnet=$NETLAB_CIDR" \
       "${NETLAB_WAN_RATE:+dc-b=$NETLAB_DC_B wan=$NETLAB_WAN_RATE}")
  done
}

main() {
  [[ $# -ge 1 ]] || usage
  local sub=$1
  shift
  case $sub in
    up)   cmd_up "$@" ;;
    down) cmd_down "$@" ;;
    run)  cmd_run "$@" ;;
    each) cmd_each "$@" ;;
    exec) cmd_exec "$@" ;;
    list) cmd_list ;;
    -h|--help|help) usage ;;
    *) die "unknown command '$sub' (up, down, run, each, exec, list)" ;;
  esac
}

main "$@"
