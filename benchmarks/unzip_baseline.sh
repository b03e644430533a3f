#!/bin/sh
# The baseline: what the application did before ortbundle existed. The kept libraries are
# extracted straight out of the cached wheels with unzip -j, one unzip per runtime tree and wheel.
#
# usage: unzip_baseline.sh LIST OUT
#   LIST  one line per runtime tree and wheel: TREE<TAB>WHEEL<TAB>MEMBER MEMBER ...
#         (benchmarks/bench.py writes it from a real build's kept set)
#   OUT   where the trees go: OUT/TREE/<file>, flat
set -eu
set -f # member names go to unzip as they are, never globbed by the shell

if [ "$#" -ne 2 ]; then
    echo "usage: $0 LIST OUT" >&2
    exit 2
fi

tab=$(printf '\t')
while IFS=$tab read -r tree wheel members; do
    mkdir -p "$2/$tree"
    # shellcheck disable=SC2086 # one member per word
    unzip -j -o -q "$wheel" $members -d "$2/$tree"
done <"$1"
