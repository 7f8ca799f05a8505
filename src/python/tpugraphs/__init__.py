"""tpugraphs: the TpuGraphs datasets, metrics and models of the tpugraphs C++ library.

    import tpugraphs as tg
    ds = tg.Dataset("xla_random.tpug")
    for g in ds.graphs(collection="layout:xla:random", split="train"):
        g.node_feat, g.edge_index, g.config_runtime        # numpy, release names and dtypes
        c = g.layout_config_feat([0, 5, 17])              # int8 [3, nc, 18], read lazily
    tg.metrics.kendall_tau(scores, runtimes)
    tg.Model("xla_random.tpm").score(g)
    tg.train(dataset="xla_random.tpug", config="tools/configs/layout.textproto",
             output="m.tpm", epochs=20)                   # TrainConfig fields, as the flags
    tg.evaluate(data="valid.tpug", model="m.tpm", split="valid")   # `evaluate --json` as a dict

See docs/python.md. Errors raise tpugraphs.Error (a RuntimeError) with the message the
`tpugraphs` command would print and a `code` ("no_matching_graphs", "usage_error", ...). The
library logs to logging.getLogger("tpugraphs") (progress lines at INFO).
"""

import os as _os
import sys as _sys
import sysconfig as _sysconfig


def _explain_import_error(error):
    """The message for an extension module that this interpreter cannot load: which interpreter
    the package was built for (_build_info.py, or the extension's file name) and which one runs."""
    here = _os.path.dirname(_os.path.abspath(__file__))
    running = (f"{_sys.implementation.name} {_sys.version.split()[0]} ({_sys.executable}, "
               f"extension suffix {_sysconfig.get_config_var('EXT_SUFFIX')})")
    try:
        from . import _build_info as info
        built = (f"{info.PYTHON_IMPLEMENTATION} {info.PYTHON_VERSION} ({info.PYTHON_EXECUTABLE}, "
                 f"extension suffix {info.EXT_SUFFIX})")
    except ImportError:
        found = sorted(f for f in _os.listdir(here) if f.startswith("_tpugraphs."))
        built = ("an unknown interpreter (no _build_info.py); extension files here: "
                 + (", ".join(found) or "none"))
    return (f"tpugraphs in {here} cannot load its extension module _tpugraphs: {error}\n"
            f"  built for:  {built}\n"
            f"  running on: {running}\n"
            "Build and install it for this interpreter from a checkout of tpugraphs:\n"
            f"  {_sys.executable} -m pip install --no-build-isolation .\n"
            "or, for Debian's /usr/bin/python3: bash tools/install-python.sh (docs/python.md).")


try:
    from ._tpugraphs import (Dataset, Error, Graph, Model, __version__, evaluate, export, ingest,
                             synth, train, tune)
except ImportError as e:
    raise ImportError(_explain_import_error(e), name=__name__) from None
from . import metrics

__all__ = ["Dataset", "Error", "Graph", "Model", "evaluate", "export", "ingest", "metrics", "synth",
           "train", "tune", "__version__"]

# Release .npz members per task, in the order `tpugraphs export` writes them.
_MEMBERS = {
    "tile": ("node_feat", "node_opcode", "edge_index", "config_feat", "config_runtime",
             "config_runtime_normalizers"),
    "layout": ("node_feat", "node_opcode", "edge_index", "node_config_ids", "node_config_feat",
               "config_runtime", "node_splits"),
}


def _graphs(self, collection=None, split=None):
    """Yields the graphs of `collection` and `split` (None: any), one at a time, in file order.

    Each graph is decoded when the iteration reaches it; layout config values are not read
    until asked for (layout_config_feat, node_config_feat)."""
    for i in self.indices(collection or "", split or ""):
        yield self.graph_at(i)


def _iter(self):
    return _graphs(self)


def _keys(self):
    """The names of the release .npz members of this graph (as np.load(...).files)."""
    return _MEMBERS[self.kind]


def _arrays(self, configs=True):
    """All release .npz members as a dict of numpy arrays, equal to np.load of the exported file.

    configs=False leaves out node_config_feat (the only member read from the file on demand)."""
    return {k: getattr(self, k) for k in self.keys() if configs or k != "node_config_feat"}


def _getitem(self, name):
    if name not in self.keys():
        raise KeyError(f"{name} is not a member of {self.kind} graph '{self.name}'")
    return getattr(self, name)


Dataset.graphs = _graphs
Dataset.__iter__ = _iter
Graph.keys = _keys
Graph.arrays = _arrays
Graph.__getitem__ = _getitem
Error.__module__ = "tpugraphs"
