#!/bin/sh
# fake_worker.sh -- a scripted stand-in for `convtune tune --worker-device N`
# that speaks tools/cli/worker.c's protocol, so that the CPU tests
# (test_cli_devices.c) drive `convtune tune --devices` (devices.c) without a
# GPU; CONVTUNE_WORKER names it.  What it does, by $FAKE_WORKER_MODE:
#   ok       every shape answered OK: algorithm "fake", config "gpu=N n=I"
#   mixed    GPU 1 says it is another GPU model
#   crash    GPU 1 dies (exit status 9) on its first shape
#   garbage  GPU 1 answers its first shape with a line of no known kind
#   nostart  GPU 1 cannot start (as a worker without its GPU)
#   slow     each shape takes a second; after a SIGINT the shape in hand
#            is answered INTERRUPTED ($FAKE_WORKER_INTERRUPTED: its status)
#   store    each shape tuned into the cache (--cache) as a real worker
#            would: `$FAKE_WORKER_STORE $FAKE_WORKER_STORE_AS CACHE MODEL KEY`
#            (a test binary, test_cli_shard.c) stores a winner that depends
#            on the key alone, and prints the row
device=-1
cache=
while [ $# -gt 0 ]; do
  [ "$1" = --worker-device ] && device=$2
  [ "$1" = --cache ] && cache=$2
  shift
done
mode=${FAKE_WORKER_MODE:-ok}
if [ "$mode" = nostart ] && [ "$device" = 1 ]; then
  echo "convtune: no usable CUDA GPU 1: (fake worker)" >&2
  printf 'failed\t3\n'
  exit 3
fi
model="FAKE GPU|sm90|132sm"
if [ "$mode" = mixed ] && [ "$device" = 1 ]; then model="OTHER GPU|sm80|108sm"; fi
interrupted=0
trap 'interrupted=1' INT
printf 'ready\t%s\n' "$model"
n=0
while IFS= read -r key; do
  n=$((n + 1))
  case "$mode/$device" in
    crash/1) exit 9 ;;
    garbage/1) echo "hello from GPU 1"; continue ;;
  esac
  if [ "$mode" = store ]; then
    "$FAKE_WORKER_STORE" "$FAKE_WORKER_STORE_AS" "$cache" "$model" "$key" || exit 8
    continue
  fi
  if [ "$mode" = slow ]; then sleep 1; fi
  if [ "$interrupted" = 1 ]; then
    printf 'row\t%s\t\t\t-1\t-1\t0\t0\tinterrupted\n' "${FAKE_WORKER_INTERRUPTED:-19}"
  else
    printf 'row\t0\tfake\tgpu=%s n=%s\t0.00%s\t-1\t2\t0\t\n' "$device" "$n" "$n"
  fi
done
