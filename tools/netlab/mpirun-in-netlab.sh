#!/usr/bin/env bash
# mpirun-in-netlab.sh -- run an MPI program with rank r in netlab host (r mod H), over TCP.
#
# Inside a lab (NETLAB_PREFIX set, e.g. under `netlab.sh run`):
#   mpirun-in-netlab.sh [--np N] [--timeout S] [--mpirun-arg ARG]... -- PROG [ARGS...]
# Standalone (brings up its own lab with netlab.sh run, removes it afterwards):
#   mpirun-in-netlab.sh --hosts H --rate R [--prefix P] [--subnet A.B.C] [--burst B]
#                       [--latency L] [--timeout S] [--np N] [--mpirun-arg ARG]... -- PROG [ARGS...]
#
# --np defaults to the number of hosts. Exits 77 when not root or when ip/tc/mpirun are missing.
set -euo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")
NETLAB="$(dirname "$SELF")/netlab.sh"
readonly SELF NETLAB

die() { echo "mpirun-in-netlab: $*" >&2; exit 2; }

LAB_OPTS=() NP="" TIMEOUT=600 MPIRUN_ARGS=() PROG=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --hosts|--rate|--prefix|--subnet|--burst|--latency) LAB_OPTS+=("$1" "${2:?}"); shift 2 ;;
    --timeout)    TIMEOUT=${2:?}; shift 2 ;;
    --np)         NP=${2:?}; shift 2 ;;
    --mpirun-arg) MPIRUN_ARGS+=("${2:?}"); shift 2 ;;
    --)           shift; PROG=("$@"); break ;;
    -h|--help)    sed -n '2,10s/^# \{0,1\}//p' "$SELF" >&2; exit 2 ;;
    *)            die "unknown option '$1' (the program goes after --)" ;;
  esac
done
[[ ${#PROG[@]} -gt 0 ]] || die "no program given (... -- PROG ARGS)"
command -v mpirun >/dev/null 2>&1 || { echo "mpirun-in-netlab: mpirun not found" >&2; exit 77; }

if [[ ${#LAB_OPTS[@]} -gt 0 ]]; then
  # Standalone: our own lab, bounded by the same timeout; netlab.sh removes it on any exit.
  inner=(--timeout "$TIMEOUT")
  [[ -n $NP ]] && inner+=(--np "$NP")
  for a in "${MPIRUN_ARGS[@]}"; do inner+=(--mpirun-arg "$a"); done
  exec "$NETLAB" run "${LAB_OPTS[@]}" --timeout $((TIMEOUT + 30)) -- \
    "$SELF" "${inner[@]}" -- "${PROG[@]}"
fi

[[ -n ${NETLAB_PREFIX:-} && -n ${NETLAB_HOSTS:-} && -n ${NETLAB_CIDR:-} ]] ||
  die "not inside a lab: give --hosts/--rate, or run under 'netlab.sh run'"
NP=${NP:-$NETLAB_HOSTS}
[[ $NP =~ ^[0-9]+$ && $NP -ge 1 ]] || die "--np must be a positive integer"

# The ranks live in the host namespaces but the PMIx server lives in mpirun (root namespace):
# let it listen on the lab's subnet (the bridge has .254 there) and accept remote clients.
export PMIX_MCA_ptl_tcp_remote_connections=1
export PMIX_MCA_ptl_tcp_if_include=$NETLAB_CIDR
# Rank r enters host r mod H; UCX hints for programs that also use UCX.
# shellcheck disable=SC2016
launcher='h=$((OMPI_COMM_WORLD_RANK % NETLAB_HOSTS)); d=${NETLAB_PREFIX}h$h
exec ip netns exec "$d" env NETLAB_RANK=$h UCX_TLS=tcp,self UCX_NET_DEVICES="$d" "$@"'

exec timeout --kill-after=10 "$TIMEOUT" \
  mpirun --allow-run-as-root --oversubscribe -np "$NP" \
    -x PMIX_MCA_ptl_tcp_remote_connections -x PMIX_MCA_ptl_tcp_if_include \
    -x NETLAB_PREFIX -x NETLAB_HOSTS -x NETLAB_RATE -x NETLAB_RATE_BPS \
    --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include "$NETLAB_CIDR" \
    --mca oob_tcp_if_include "$NETLAB_CIDR" \
    "${MPIRUN_ARGS[@]}" \
    bash -c "$launcher" mpirun-in-netlab "${PROG[@]}"
