#!/usr/bin/env bash
# How one training step scales with threads (-j) on this machine, for five cases: the
# layout-large recipe on an uneven pair of nlp-sized programs (1,800 and 9,000 nodes), the layout
# recipe on an xla-sized pair (4,000 and 12,000) and on one program of 3,000 nodes, and with
# cross-configuration attention on that program, and a Graph Segment Training step on one of
# 20,000 nodes; and how three commands on one graph scale: tune of a
# 3,000-node program, predict of a 20,000-node one (1,000 configurations) and a validation of
# 10,000 configurations. Per case and -j: the time, the speed-up over -j 1, the machine's ceiling
# (T independent -j 1 runs against one) and the efficiency (speed-up / ceiling), and the phases
# at -j 1 with their serial share; the machine and its load first.
# Runs unchanged on any machine; the default -j values are 1, 2, 4, ... and the number of cores.
# Usage: tools/bench/bench-scaling.sh [--threads 1,2,4,...] [--json]
#                                     [--cases pair-nlp,pair-xla,single,gst,attention,tune,predict,validation]
#                                     [--steps LO,HI] [--scale F] [--binary PATH] [--work DIR]
# (tools/bench/bench-scaling.py --help explains each flag; docs/train.md, "More cores and
# machines", has the figures.)
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
py=/usr/bin/python3
[ -x "$py" ] || py=python3
exec "$py" "$here/tools/bench/bench-scaling.py" "$@"
