#!/usr/bin/env bash
# selftest.sh -- checks netlab.sh: hosts reach each other, links are shaped, and nothing is
# left behind after a normal run, a failing command, a timeout or a TERM.
# Exits 0 on success, 1 on failure, 77 (skip) when not root or ip/tc are missing.
# Finishes in well under a minute.
# Functions below run through check() (SC2317); the single-quoted commands expand in the lab.
# shellcheck disable=SC2317,SC2016
set -euo pipefail

HERE=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
NETLAB=$HERE/netlab.sh
RATE=100mbit
RATE_MIB_S=11.92   # 100 Mbit/s in MiB/s, the unit ucx_perftest prints

# ---- inner part: runs under `netlab.sh run`, in the root namespace of a live lab --------
if [[ ${1:-} == --inner ]]; then
  fails=0
  check() {  # check NAME CMD...: run CMD, print PASS/FAIL
    local name=$1; shift
    if "$@"; then echo "PASS $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
  }
  reach() {  # reach FROM TO: host FROM reaches host TO's address
    local to_ip_var="NETLAB_IP_$2"
    if ! command -v ping >/dev/null 2>&1; then
      echo "  (ping not found: connectivity is shown by the transfer check instead)"
      return 0
    fi
    "$NETLAB" exec "$1" -- ping -c 1 -W 2 "${!to_ip_var}" >/dev/null
  }
  shaped() {  # shaped NS-or-empty DEV: a tbf root qdisc at the lab's rate
    local out
    if [[ -n $1 ]]; then out=$(tc -n "$1" qdisc show dev "$2"); else out=$(tc qdisc show dev "$2"); fi
    [[ $out == *"qdisc tbf"*"rate 100Mbit"* ]] || { echo "  qdisc on $2: $out"; return 1; }
  }
  bandwidth_bounded() {
    # Shaping can only slow a transfer down, so the check is one-sided: at most 1.5x the rate.
    if ! command -v ucx_perftest >/dev/null 2>&1; then
      echo "  (ucx_perftest not found: bandwidth not measured, qdisc checks only)"
      return 0
    fi
    local port=13377 tries out bw
    "$NETLAB" exec 0 --timeout 30 -- ucx_perftest -p "$port" >/dev/null 2>&1 &
    local srv=$!
    for ((tries = 0; tries < 50; tries++)); do
      ip netns exec "$NETLAB_NS_0" ss -ltn 2>/dev/null | grep -q ":$port " && break
      sleep 0.1
    done
    # 10 x 2 MiB = 20 MiB: about 1.7 s at 100 Mbit/s.
    out=$("$NETLAB" exec 1 --timeout 30 -- ucx_perftest "$NETLAB_IP_0" -p "$port" \
            -t ucp_get -s 2097152 -n 10 -w 1 2>&1) || { echo "$out" | tail -5; wait "$srv"; return 1; }
    wait "$srv" || true
    bw=$(awk '/^Final:/ { print $7 }' <<<"$out")
    echo "  ucx_perftest ucp_get over a $RATE link: ${bw:-?} MiB/s (line rate $RATE_MIB_S)"
    [[ -n $bw ]] && awk -v bw="$bw" -v r="$RATE_MIB_S" 'BEGIN { exit !(bw > 0 && bw <= 1.5 * r) }'
  }
  check "host0 reaches host1" reach 0 1
  check "host1 reaches host0" reach 1 0
  check "host link shaped (host side, in namespace)" shaped "$NETLAB_NS_0" "$NETLAB_DEV_0"
  check "host link shaped (switch side, bridge port)" shaped "" "${NETLAB_PREFIX}s1"
  check "transfer no faster than the shaped rate" bandwidth_bounded
  exit $((fails > 0))
fi

# ---- outer part ---------------------------------------------------------------------------
if [[ $(id -u) -ne 0 ]] || ! command -v ip >/dev/null 2>&1 || ! command -v tc >/dev/null 2>&1; then
  echo "netlab selftest: SKIP: netlab: needs root (and ip/tc)"
  exit 77
fi

export NETLAB_QUIET=1
fails=0
base="ts$$"
leftovers() {  # what still carries prefix $1
  { ip netns list | awk '{print $1}'; ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//'; } |
    grep -E "^$1(br|s[0-9]+|h[0-9]+)$" || true
  [[ ! -e /run/netlab/$1.env ]] || echo "/run/netlab/$1.env"
}
expect() {  # expect NAME WANT_RC GOT_RC PREFIX: exit status and a clean slate afterwards
  local left
  left=$(leftovers "$4")
  if [[ $3 -eq $2 && -z $left ]]; then
    echo "PASS $1 (exit $3, nothing left behind)"
  else
    echo "FAIL $1 (exit $3, wanted $2; left behind: ${left:-nothing})"
    fails=$((fails + 1))
  fi
}

rc=0
"$NETLAB" run --hosts 2 --rate "$RATE" --prefix "${base}a" --timeout 40 -- "$0" --inner || rc=$?
expect "lab run with checks" 0 "$rc" "${base}a"

rc=0
"$NETLAB" run --hosts 2 --rate "$RATE" --prefix "${base}b" --timeout 10 -- false || rc=$?
expect "failing command" 1 "$rc" "${base}b"

rc=0
"$NETLAB" run --hosts 2 --rate "$RATE" --prefix "${base}c" --timeout 1 -- \
  bash -c '"$NETLAB_SELF" exec 1 -- sleep 30' || rc=$?
expect "command over its timeout" 124 "$rc" "${base}c"

rc=0
"$NETLAB" run --hosts 2 --rate "$RATE" --prefix "${base}d" --timeout 30 -- \
  bash -c '"$NETLAB_SELF" exec 0 -- sleep 30 & sleep 30' &
pid=$!
for ((tries = 0; tries < 100; tries++)); do   # wait (at most 10 s) for the lab to be up
  [[ -e /run/netlab/${base}d.env ]] && ip netns pids "${base}dh0" 2>/dev/null | grep -q . && break
  sleep 0.1
done
kill -TERM "$pid"
wait "$pid" || rc=$?
expect "TERM while running" 143 "$rc" "${base}d"

if ((fails > 0)); then echo "netlab selftest: $fails FAILED"; exit 1; fi
echo "netlab selftest: all passed"
