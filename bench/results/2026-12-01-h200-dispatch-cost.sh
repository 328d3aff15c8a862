#!/usr/bin/env bash
# One device call: cake run --from hopper w4 w3 at the reference cell, with the code before (c36fcba) and after.
set -uo pipefail
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/deps .whl/*.whl || exit 1
(python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --target /tmp/new-site \
   . plugins/targets/cake-targets-nvidia plugins/verifier_rules/cake-rules-core plugins/cost_models/cake-cost-roofline \
   plugins/tactics/cake-tactics-core plugins/agents/cake-agent-search) >/dev/null 2>&1 || { echo "install failed"; exit 1; }
HERE=$PWD  # build/benchcost: this branch at the commit measured (argument 1); ../benchcost-before: c36fcba; way/: /work/way/w3.cake, w4.cake
S="cake_core/problems/kmeans_assign/schedules/hopper.cake $HERE/way/w4.cake $HERE/way/w3.cake"
for v in before after; do
  if [ $v = before ]; then T=$HERE/../benchcost-before; C=c36fcba9b9981cf40544b4c141123675de368e5e; else T=$HERE; C=$1; fi
  echo "== $v ($C)"; date +%T
  (cd $T && CAKE_COMMIT=$C PYTHONPATH=$T:/tmp/new-site:/tmp/deps timeout 260 python3 -m cake_core.cli run kmeans-assign \
     --target h200 --from $S --out /tmp/run-$v 2>&1 | tail -12)
  cp /tmp/run-$v/ledger.sqlite $OUT/$v.sqlite
done
date +%T
PYTHONPATH=$HERE:/tmp/deps python3 bench/dispatch_cost.py $OUT/before.sqlite $OUT/after.sqlite --out $OUT/dispatch-cost.json \
  --commit-before c36fcba9b9981cf40544b4c141123675de368e5e --commit-after $1 \
  --changed "the run's inputs cross to the GPU worker once (GpuRunner.keep), not with every check, timing and oracle run"
