"""Two Python threads at once on one Model and one Dataset, for ThreadSanitizer.

Scoring and reading release the GIL (docs/python.md), so the two threads run library code
side by side: one scores every layout graph with a shared Model, the other decodes the graphs
and reads their configurations. Each repeats its work and checks that it got the same results
as a single-threaded pass. Usage: python_threads.py DATASET LAYOUT_MODEL
"""

import sys
import threading

import numpy as np

import tpugraphs as tg


def main():
    dataset, model_path = sys.argv[1], sys.argv[2]
    ds = tg.Dataset(dataset)
    model = tg.Model(model_path, threads=2)
    # Four graphs: under TSan the interpreter's threads run 5-15 times slower.
    graphs = list(ds.graphs(collection="layout:synth:random"))[:4]
    names = {g.name for g in graphs}
    want_scores = {g.name: model.score(g) for g in graphs}
    want_sums = {g.name: float(g.node_feat.sum()) for g in graphs}
    errors = []

    def score():
        for _ in range(2):
            for g in graphs:
                if model.score(g).tobytes() != want_scores[g.name].tobytes():
                    errors.append("scores of %s changed" % g.name)

    def read():
        for _ in range(2):
            for g in ds.graphs(collection="layout:synth:random"):
                if g.name not in names:
                    continue
                if float(g.node_feat.sum()) != want_sums[g.name]:
                    errors.append("features of %s changed" % g.name)
                cfg = g.layout_config_feat(list(range(min(8, g.num_configs))))
                if cfg.shape[0] != min(8, g.num_configs):
                    errors.append("configurations of %s" % g.name)

    threads = [threading.Thread(target=score), threading.Thread(target=read)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        sys.exit("python_threads: " + "; ".join(errors))
    print("python_threads: %d graphs scored and read by two threads at once" % len(graphs),
          file=sys.stderr)


if __name__ == "__main__":
    main()
