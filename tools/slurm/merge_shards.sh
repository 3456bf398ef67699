#!/bin/sh
#SBATCH --job-name=convtune-merge
#SBATCH --ntasks=1
#SBATCH --output=convtune-merge-%j.log
#
# merge_shards.sh -- the step after tune_shard.sh's N array tasks: joins
# OUTDIR/shard-0.db ... shard-(N-1).db into OUT with `convtune merge` (no
# GPU needed).  Submit it with --dependency=afterok:JOB so that it runs once
# every task has succeeded; it checks that each left its shard-K.done
# anyway.  A shard that had no shape (fewer shapes than shards) made no
# cache, and is passed over.
#
#   sbatch --dependency=afterok:$job tools/slurm/merge_shards.sh OUTDIR N OUT.db
#
# $CONVTUNE: the convtune program (default: convtune on PATH).
# Exit status: merge's; 1 when a shard has not finished; 2 for a bad
# command line.
set -eu
me=merge_shards.sh
if [ $# -ne 3 ]; then
  echo "usage: $me OUTDIR N OUT" >&2
  exit 2
fi
outdir=$1
count=$2
out=$3
case $count in
  '' | *[!0-9]* | 0*)
    echo "$me: N must be the number of shards (a positive whole number), not '$count'" >&2
    exit 2
    ;;
esac
set --
k=0
while [ "$k" -lt "$count" ]; do
  if [ ! -f "$outdir/shard-$k.done" ]; then
    echo "$me: shard $k of $count has not finished ($outdir/shard-$k.done is missing):" \
      "merge once every task has succeeded (--dependency=afterok:JOB)" >&2
    exit 1
  fi
  if [ -f "$outdir/shard-$k.db" ]; then
    set -- "$@" "$outdir/shard-$k.db"
  else
    echo "$me: shard $k had no shape to tune" >&2
  fi
  k=$((k + 1))
done
if [ $# -eq 0 ]; then
  echo "$me: no shard tuned anything: nothing to merge" >&2
  exit 1
fi
exec "${CONVTUNE:-convtune}" merge "$@" -o "$out"
