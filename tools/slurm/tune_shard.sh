#!/bin/sh
#SBATCH --job-name=convtune-tune
#SBATCH --array=0-7
#SBATCH --ntasks=1
#SBATCH --gres=gpu:1
#SBATCH --output=convtune-tune-%A_%a.log
#
# tune_shard.sh -- one task of a Slurm job array that tunes shapes on N GPUs
# of one model: task K of N runs `convtune tune ARG... --shard K/N` into
# OUTDIR/shard-K.db and, when it succeeds, leaves OUTDIR/shard-K.done.
# merge_shards.sh then joins the shards into one cache to ship:
#
#   job=$(sbatch --parsable --array=0-7 tools/slurm/tune_shard.sh OUTDIR SUITE [OPTION...])
#   sbatch --dependency=afterok:$job tools/slurm/merge_shards.sh OUTDIR 8 OUT.db
#
# ARG... are tune's: suite files, shape specs, options (--math tf32,
# --policy fast, --devices all for several GPUs per task...).  Every task
# must be given the same ones: --shard deals the shapes out by problem key.
# The array must be 0 to N-1 (the --array of sbatch's command line
# overrides the one above; N is its size).  Use a new OUTDIR for each run:
# a shard tuned into an old cache keeps the winners found there.
# $CONVTUNE: the convtune program (default: convtune on PATH).
# Exit status: tune's, or 2 for a bad command line or array.
set -eu
me=tune_shard.sh
if [ $# -lt 2 ]; then
  echo "usage: $me OUTDIR SUITE|SHAPE... [TUNE OPTION...] (as a Slurm array task)" >&2
  exit 2
fi
outdir=$1
shift
index=${SLURM_ARRAY_TASK_ID:-}
count=${SLURM_ARRAY_TASK_COUNT:-}
if [ -z "$index" ] || [ -z "$count" ]; then
  echo "$me: not a Slurm array task (no \$SLURM_ARRAY_TASK_ID or \$SLURM_ARRAY_TASK_COUNT):" \
    "submit it with sbatch --array=0-N-1" >&2
  exit 2
fi
if [ "${SLURM_ARRAY_TASK_MIN:-0}" != 0 ] ||
  [ "${SLURM_ARRAY_TASK_MAX:-$((count - 1))}" != $((count - 1)) ]; then
  echo "$me: the array must be 0 to N-1 (--array=0-$((count - 1)) for $count tasks), not" \
    "${SLURM_ARRAY_TASK_MIN:-?} to ${SLURM_ARRAY_TASK_MAX:-?}" >&2
  exit 2
fi
mkdir -p "$outdir"
rm -f "$outdir/shard-$index.done"
"${CONVTUNE:-convtune}" tune "$@" --shard "$index/$count" --cache "$outdir/shard-$index.db" \
  --progress never
touch "$outdir/shard-$index.done"
