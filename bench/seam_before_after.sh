#!/usr/bin/env bash
# The SQLite figures of docs/search.md and docs/rules.md, before and after the storage-seam work,
# interleaved on one machine (docs/benchmarks-seam.md holds the table of the last run).
#
#   bench/seam_before_after.sh BEFORE_TREE AFTER_TREE OUT_DIR
#
# Each tree runs its own copy of the bench script behind a figure, with its own .venv
# (`make install` in both first); before and after alternate per script, so both see the
# same load. Every log starts with the load average and the tree's commit.
#
#   STEPS="rules_quick" ROUNDS=3 EXTRA_TREES=/work/wt/qd bench/seam_before_after.sh B A OUT
#
# STEPS picks the scripts (rules_eval, search, rules, rules_quick = bench_rules.py --quick,
# rules_cpu = AFTER's bench/profile_rules_query.py run on each tree's code with its own .venv:
# process CPU per query at 2k, one store per side under OUT/store-<side>, built on first use);
# ROUNDS repeats the whole alternation; EXTRA_TREES are run after *after* in each round (a
# branch under test), their logs named after the folder. Logs: OUT/<step>-<side>[-<round>].log.
set -u
before=$(cd "$1" && pwd)
after=$(cd "$2" && pwd)
out=$3
public=${PUBLIC_RULES:-$after/bench/rules_eval/public}
mkdir -p "$out"
out=$(cd "$out" && pwd)  # the steps run from inside each tree

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

steps=${STEPS:-rules_eval search rules}
rounds=${ROUNDS:-1}
for round in $(seq 1 "$rounds"); do
    suffix=""
    [ "$rounds" -gt 1 ] && suffix="-$round"
    for step in $steps; do
        for side in before after ${EXTRA_TREES:-}; do
            case $side in
                before) tree=$before ;;
                after) tree=$after ;;
                *) tree=$(cd "$side" && pwd) && side=$(basename "$tree") ;;
            esac
            case $step in
                rules_eval) run "rules_eval-$side$suffix" "$tree" .venv/bin/python bench/rules_eval/run_eval.py --public-rules "$public" ;;
                search) run "bench_search-$side$suffix" "$tree" .venv/bin/python bench/bench_search.py --sizes 10000,100000 ;;
                rules) run "bench_rules-$side$suffix" "$tree" .venv/bin/python bench/bench_rules.py ;;
                rules_quick) run "bench_rules_quick-$side$suffix" "$tree" .venv/bin/python bench/bench_rules.py --quick ;;
                rules_cpu) run "rules_cpu-$side$suffix" "$tree" .venv/bin/python "$after/bench/profile_rules_query.py" --tree "$tree" --store "$out/store-$side" --rounds "${CPU_ROUNDS:-2}" ;;
            esac
        done
    done
done
