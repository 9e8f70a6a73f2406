#!/usr/bin/env bash
# The SQLite figures of docs/search.md and docs/rules.md, before and after the storage-seam work,
# interleaved on one machine (docs/benchmarks-seam.md holds the table of the last run).
#
#   bench/seam_before_after.sh BEFORE_TREE AFTER_TREE OUT_DIR
#
# Each tree runs its own copy of the bench script behind a figure, with its own .venv
# (`make install` in both first); before and after alternate per script, so both see the
# same load. Every log starts with the load average and the tree's commit.
set -u
before=$(cd "$1" && pwd)
after=$(cd "$2" && pwd)
out=$3
public=${PUBLIC_RULES:-$after/bench/rules_eval/public}
mkdir -p "$out"

run() {  # name tree command...
    local name=$1 tree=$2
    shift 2
    local log="$out/$name.log"
    {
        echo "# $(date -u +%FT%TZ) tree=$tree commit=$(git -C "$tree" rev-parse --short HEAD)"
        echo "# load: $(cut -d' ' -f1-3 /proc/loadavg)"
        echo "# cmd: $*"
    } >"$log"
    (cd "$tree" && nice -n 10 "$@") >>"$log" 2>&1
    echo "# exit $? at $(date -u +%FT%TZ), load: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$log"
}

for step in rules_eval search rules; do
    for side in before after; do
        tree=$before
        [ "$side" = after ] && tree=$after
        case $step in
            rules_eval) run "rules_eval-$side" "$tree" .venv/bin/python bench/rules_eval/run_eval.py --public-rules "$public" ;;
            search) run "bench_search-$side" "$tree" .venv/bin/python bench/bench_search.py --sizes 10000,100000 ;;
            rules) run "bench_rules-$side" "$tree" .venv/bin/python bench/bench_rules.py ;;
        esac
    done
done
