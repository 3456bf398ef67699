#!/bin/sh
# slurm_local.sh -- tools/slurm's recipe run on this machine as Slurm would
# run it: the N tasks of the array (tune_shard.sh, each with the
# environment Slurm gives an array task) at once, then, once every one has
# succeeded (--dependency=afterok), merge_shards.sh.
# test_cli_shard.slurm_recipe_on_one_machine runs it with the fake workers.
#
#   slurm_local.sh SOURCE_DIR OUTDIR N OUT TUNE-ARG...
#
# Exit status: 1 when a task failed (their logs on stderr), else merge's.
set -eu
if [ $# -lt 5 ]; then
  echo "usage: slurm_local.sh SOURCE_DIR OUTDIR N OUT TUNE-ARG..." >&2
  exit 2
fi
src=$1
outdir=$2
count=$3
out=$4
shift 4
mkdir -p "$outdir"
pids=
k=0
while [ "$k" -lt "$count" ]; do
  SLURM_ARRAY_TASK_ID=$k SLURM_ARRAY_TASK_COUNT=$count SLURM_ARRAY_TASK_MIN=0 \
    SLURM_ARRAY_TASK_MAX=$((count - 1)) \
    sh "$src/tools/slurm/tune_shard.sh" "$outdir" "$@" >"$outdir/task-$k.log" 2>&1 &
  pids="$pids $!"
  k=$((k + 1))
done
failed=0
for pid in $pids; do
  wait "$pid" || failed=1
done
if [ "$failed" -ne 0 ]; then
  for log in "$outdir"/task-*.log; do
    echo "--- $log" >&2
    cat "$log" >&2
  done
  exit 1
fi
exec sh "$src/tools/slurm/merge_shards.sh" "$outdir" "$count" "$out"
