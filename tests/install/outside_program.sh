#!/usr/bin/env bash
# An outside C program written only against the public header: compile tests/multiproc/peer.c
# against the header and library installed in PREFIX (the InstalledPrefix fixture) with a
# plain C compiler, then publish from one process and replicate into three others, byte-exact.
#   outside_program.sh PREFIX SRC
set -euo pipefail
prefix=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"; kill $(jobs -p) 2>/dev/null || true' EXIT
unset LD_LIBRARY_PATH
libdir=$(dirname "$(ls "$prefix"/lib*/libtensorhub.so | head -1)")
cc -std=c99 -Wall -Wextra -Werror -o "$work/peer" "$src/tests/multiproc/peer.c" \
   -I"$prefix/include" -L"$libdir" -ltensorhub -Wl,-rpath,"$libdir"
resolved=$(ldd "$work/peer" | awk '$1 ~ /^libtensorhub\.so/ {print $3}')
case $(readlink -f "$resolved") in
  "$(readlink -f "$prefix")"/*) ;;
  *) echo "peer resolves libtensorhub to '$resolved', outside $prefix"; exit 1 ;;
esac

mkfifo "$work/trainer.in"
"$work/peer" < "$work/trainer.in" > "$work/trainer.out" &
exec 3> "$work/trainer.in"
printf 'init\nopen m trainer 0 1\ntensors 3000000,0,17,1048576\nfill 5\npublish 1\n' >&3
# Wait for the five replies (reading the output file, no fixed sleep).
for _ in $(seq 1 600); do
  [ "$(wc -l < "$work/trainer.out")" -ge 5 ] && break
  read -r -t 0.1 _ < /dev/zero || true
done
grep -c '^ok' "$work/trainer.out" | grep -qx 5 || { cat "$work/trainer.out"; exit 1; }
addr=$(head -1 "$work/trainer.out" | awk '{print $2}')
pids=()
for i in 1 2 3; do
  printf 'init registry=%s\nopen m rollout%d 0 1\ntensors 3000000,0,17,1048576\nreplicate latest\ncheck 5\nquit\n' \
    "$addr" "$i" | "$work/peer" > "$work/r$i.out" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
printf 'quit\n' >&3
exec 3>&-
wait
for i in 1 2 3; do
  if [ "$(grep -c '^ok' "$work/r$i.out")" -ne 5 ]; then
    echo "rollout $i failed:"; cat "$work/r$i.out"; exit 1
  fi
done
echo "outside program: 1 publisher + 3 replicators byte-exact against the installed library"
