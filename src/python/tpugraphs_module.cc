// The Python extension module tpugraphs._tpugraphs: a thin pybind11 layer over the library
// (docs/python.md). Datasets are read lazily through io::DatasetReader, arrays are numpy views of
// the C++ buffers (no copies), library errors become tpugraphs.Error carrying the message the CLI
// prints, and every call that reads files or computes releases the GIL.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/logging.h"
#include "tpugraphs/common/status.h"
#include "tpugraphs/eval/metrics.h"
#include "tpugraphs/eval/scorer.h"
#include "tpugraphs/ingest/export.h"
#include "tpugraphs/ingest/ingest.h"
#include "tpugraphs/io/dataset.h"
#include "tpugraphs/io/graph_filter.h"
#include "tpugraphs/train/model_scorer.h"

namespace py = pybind11;

namespace tpugraphs::python {
namespace {

// A numpy array viewing `data` (owned by `owner`, which the array keeps alive).
template <typename T>
py::array View(const std::vector<int64_t>& shape, const T* data, py::handle owner) {
  std::vector<py::ssize_t> dims(shape.begin(), shape.end());
  return py::array(py::dtype::of<T>(), dims, data, owner);
}

// A numpy array taking over a vector (the capsule frees it with the array).
template <typename T>
py::array Adopt(std::vector<T>&& values, const std::vector<int64_t>& shape) {
  auto* owned = new std::vector<T>(std::move(values));
  py::capsule free_when_done(owned, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  std::vector<py::ssize_t> dims(shape.begin(), shape.end());
  return py::array(py::dtype::of<T>(), dims, owned->data(), free_when_done);
}

// One graph of a dataset: everything but the layout config values, which are read on demand.
struct PyGraph {
  std::shared_ptr<const io::DatasetReader> reader;
  int64_t index = -1;
  Graph graph;

  void RequireKind(TaskKind kind, const char* array) const {
    if (graph.kind != kind) {
      throw py::attribute_error(std::string(TaskKindName(graph.kind)) + " graph '" + graph.name +
                                "' has no " + array + " (a " + std::string(TaskKindName(kind)) +
                                " array)");
    }
  }
  // All layout config values as the release stores them: float32 [c, nc, 18].
  py::array NodeConfigFeat() const {
    RequireKind(TaskKind::kLayout, "node_config_feat");
    const int64_t c = graph.num_configs, nc = graph.num_config_nodes();
    py::array_t<float> out({c, nc, int64_t{kLayoutConfigFeatureCount}});
    float* dst = out.mutable_data();
    const int64_t row = nc * kLayoutConfigFeatureCount;
    {
      py::gil_scoped_release unlocked;
      const int64_t per = std::max<int64_t>(1, reader->configs_per_block(index));
      for (int64_t b = 0; b < c && row > 0; b += per) {
        const int64_t e = std::min(c, b + per);
        std::vector<int8_t> values = Unwrap(reader->ReadLayoutConfigRange(index, b, e));
        std::copy(values.begin(), values.end(), dst + b * row);
      }
    }
    return out;
  }
  py::array LayoutConfigFeat(std::optional<std::vector<int64_t>> indices) const {
    RequireKind(TaskKind::kLayout, "layout_config_feat");
    std::vector<int64_t> wanted;
    if (indices) {
      wanted = std::move(*indices);
    } else {
      wanted.resize(graph.num_configs);
      for (int64_t i = 0; i < graph.num_configs; ++i) wanted[i] = i;
    }
    std::vector<int8_t> values;
    {
      py::gil_scoped_release unlocked;
      values = Unwrap(reader->ReadLayoutConfigs(index, wanted));
    }
    return Adopt(std::move(values), {static_cast<int64_t>(wanted.size()), graph.num_config_nodes(),
                                     kLayoutConfigFeatureCount});
  }
  py::array NormalizedRuntime() const {
    std::vector<double> r(graph.num_configs);
    for (int64_t i = 0; i < graph.num_configs; ++i) r[i] = graph.NormalizedRuntime(i);
    return Adopt(std::move(r), {graph.num_configs});
  }
};

struct PyDataset {
  std::shared_ptr<const io::DatasetReader> reader;

  static PyDataset Open(const std::string& path) {
    PyDataset d;
    py::gil_scoped_release unlocked;
    d.reader = Unwrap(io::DatasetReader::Open(path));
    return d;
  }
  int64_t CheckIndex(int64_t i) const {
    const int64_t n = reader->num_graphs();
    if (i < 0) i += n;
    if (i < 0 || i >= n) {
      throw Error(reader->path() + ": graph index " + std::to_string(i) + " out of range [0, " +
                  std::to_string(n) + ")");
    }
    return i;
  }
  PyGraph Read(int64_t i) const {
    i = CheckIndex(i);
    PyGraph g;
    g.reader = reader;
    g.index = i;
    py::gil_scoped_release unlocked;
    g.graph = Unwrap(reader->ReadGraph(i, /*with_layout_configs=*/false));
    return g;
  }
  int64_t Find(const std::string& name, const std::string& collection) const {
    io::GraphFilter filter;
    filter.names = {name};
    if (!collection.empty()) filter.collections = {collection};
    const std::vector<int64_t> hits = Unwrap(io::SelectGraphs(*reader, filter));
    if (hits.size() > 1) {
      std::string in;
      for (int64_t i : hits) in += (in.empty() ? "" : ", ") + reader->info(i).collection;
      throw Error(reader->path() + ": graph name '" + name + "' is in several collections (" + in +
                  "); pass collection=");
    }
    return hits[0];
  }
  std::vector<int64_t> Select(const std::string& collection, const std::string& split) const {
    if (!collection.empty()) Check(ValidateCollection(collection));
    if (!split.empty()) Check(ValidateSplit(split));
    // Unlike the commands, an empty selection is an empty list here (Python iteration).
    io::GraphFilter filter;
    if (!collection.empty()) filter.collections = {collection};
    if (!split.empty()) filter.splits = {split};
    std::vector<int64_t> out;
    for (int64_t i = 0; i < reader->num_graphs(); ++i) {
      const auto& info = reader->info(i);
      if (filter.Matches(info.collection, info.split, info.name)) out.push_back(i);
    }
    return out;
  }
  std::vector<std::string> Collections() const {
    std::vector<std::string> out;
    for (int64_t i = 0; i < reader->num_graphs(); ++i) {
      const auto& c = reader->info(i).collection;
      if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
    }
    std::sort(out.begin(), out.end());
    return out;
  }
};

py::dict InfoDict(const io::GraphInfo& info, int64_t index) {
  py::dict d;
  d["index"] = index;
  d["name"] = info.name;
  d["collection"] = info.collection;
  d["split"] = info.split;
  d["kind"] = std::string(TaskKindName(info.kind));
  d["num_nodes"] = info.num_nodes;
  d["num_edges"] = info.num_edges;
  d["num_configs"] = info.num_configs;
  d["num_config_nodes"] = info.num_config_nodes;
  return d;
}

// A model file (single or ensemble) or several model files combined as `tpugraphs predict
// --model A --model B --ensemble ...` does.
struct PyModel {
  std::unique_ptr<eval::ConfigScorer> scorer;
  std::unique_ptr<std::mutex> mu = std::make_unique<std::mutex>();

  static PyModel Load(const std::vector<std::string>& paths, const std::string& ensemble,
                      int threads, int64_t memory_mb) {
    if (paths.empty()) throw Error("usage: Model needs at least one model file");
    if (memory_mb < 16) throw Error("usage: memory_per_thread must be at least 16 (MiB)");
    PyModel m;
    eval::ScorerSpec spec;
    spec.models = paths;
    spec.ensemble = ensemble;
    spec.model_options.threads = threads;
    spec.model_options.memory_mb = memory_mb;
    py::gil_scoped_release unlocked;
    m.scorer = Unwrap(eval::MakeScorer(spec, nullptr));
    return m;
  }
  py::array Score(const PyGraph& g, std::optional<std::vector<int64_t>> indices) {
    std::vector<int64_t> configs;
    if (indices) {
      configs = std::move(*indices);
      for (int64_t c : configs) {
        if (c < 0 || c >= g.graph.num_configs) {
          throw Error(g.reader->path() + ": graph '" + g.graph.name + "' (" + g.graph.collection +
                      "): config index " + std::to_string(c) + " out of range [0, " +
                      std::to_string(g.graph.num_configs) + ")");
        }
      }
    } else {
      configs.resize(g.graph.num_configs);
      for (int64_t i = 0; i < g.graph.num_configs; ++i) configs[i] = i;
    }
    std::vector<double> scores;
    {
      py::gil_scoped_release unlocked;
      std::lock_guard<std::mutex> lock(*mu);
      if (!configs.empty()) {
        eval::ScoringInput input{g.graph, g.reader.get(), g.index};
        scores = Unwrap(scorer->Score(input, configs));
      }
    }
    if (scores.size() != configs.size()) {
      throw Error(scorer->name() + ": wrong number of scores for " + g.graph.Id());
    }
    const auto n = static_cast<int64_t>(scores.size());
    return Adopt(std::move(scores), {n});
  }
};

// A 1-D float64 view of `x` (converted if needed), checked finite.
py::array_t<double, py::array::c_style | py::array::forcecast> Vector(py::object x,
                                                                      const char* what) {
  auto a = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(x);
  if (!a) throw Error(std::string(what) + ": not convertible to a float64 array");
  if (a.ndim() != 1) {
    throw Error(std::string(what) + ": expected a 1-D array, got " + std::to_string(a.ndim()) +
                " dimensions");
  }
  const double* p = a.data();
  for (py::ssize_t i = 0; i < a.size(); ++i) {
    if (std::isnan(p[i])) {
      throw Error(std::string(what) + ": NaN at position " + std::to_string(i));
    }
  }
  return a;
}

template <typename Fn>
double Metric(py::object scores, py::object runtimes, Fn fn) {
  auto s = Vector(std::move(scores), "scores");
  auto r = Vector(std::move(runtimes), "runtimes");
  if (s.size() != r.size()) {
    throw Error("scores and runtimes differ in length (" + std::to_string(s.size()) + " vs " +
                std::to_string(r.size()) + ")");
  }
  std::span<const double> sv(s.data(), static_cast<size_t>(s.size()));
  std::span<const double> rv(r.data(), static_cast<size_t>(r.size()));
  py::gil_scoped_release unlocked;
  return fn(sv, rv);
}

py::dict Ingest(const std::vector<std::string>& inputs, const std::string& output,
                const std::string& collection, const std::string& split, bool keep_going,
                int threads, int compression_level, const std::string& hlo_stage,
                int64_t layout_candidates, uint64_t seed, bool mark_absent_dimensions) {
  IngestConfig config;
  for (const auto& in : inputs) config.add_inputs(in);
  config.set_output(output);
  config.set_collection(collection);
  config.set_split(split);
  config.set_keep_going(keep_going);
  config.set_threads(threads);
  config.set_compression_level(compression_level);
  config.set_hlo_stage(hlo_stage);
  config.set_layout_candidates(layout_candidates);
  config.set_seed(seed);
  config.set_mark_absent_dimensions(mark_absent_dimensions);
  ingest::IngestSummary s;
  {
    py::gil_scoped_release unlocked;
    Check(ingest::ValidateIngestConfig(config));
    s = Unwrap(ingest::RunIngest(config));
  }
  py::dict d;
  d["output"] = s.output;
  d["files"] = s.files;
  d["graphs"] = s.graphs;
  d["skipped"] = s.skipped;
  d["skipped_files"] = s.skipped_files;
  py::list collections;
  for (const auto& c : s.collections) {
    py::dict cd;
    cd["collection"] = c.collection;
    cd["graphs"] = c.graphs;
    cd["nodes"] = c.nodes;
    cd["edges"] = c.edges;
    cd["configs"] = c.configs;
    collections.append(cd);
  }
  d["collections"] = collections;
  d["output_bytes"] = s.output_bytes;
  d["seconds"] = s.seconds;
  return d;
}

std::vector<std::string> Export(const std::string& dataset, const std::string& output_dir,
                                const std::vector<std::string>& collections,
                                const std::vector<std::string>& splits,
                                const std::vector<std::string>& graphs, bool compress,
                                int threads) {
  ingest::ExportOptions o;
  o.dataset = dataset;
  o.output_dir = output_dir;
  o.filter.collections = collections;
  o.filter.splits = splits;
  o.filter.names = graphs;
  o.compress = compress;
  o.threads = threads;
  py::gil_scoped_release unlocked;
  return Unwrap(ingest::ExportDataset(o)).files;
}

void Bind(py::module_& m) {
  m.doc() = "tpugraphs C++ library binding (see docs/python.md)";
  static bool logging_ready = false;
  if (!logging_ready) {
    SetupLogging(-1);  // warnings and errors on stderr, no progress lines
    logging_ready = true;
  }
  train::RegisterModelFileScorer();
  static py::exception<Error> error_type(m, "Error", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      std::string code(StatusCodeName(e.code()));
      for (char& c : code) c = c == ' ' ? '_' : c;
      py::object instance = py::reinterpret_borrow<py::object>(error_type.ptr())(e.what());
      instance.attr("code") = code;
      PyErr_SetObject(error_type.ptr(), instance.ptr());
    }
  });
  m.attr("__version__") = TPUGRAPHS_VERSION;
  BindRuns(m);

  m.def("ingest", &Ingest, py::arg("inputs"), py::arg("output"), py::arg("collection") = "",
        py::arg("split") = "", py::arg("keep_going") = false, py::arg("threads") = 0,
        py::arg("compression_level") = 1, py::arg("hlo_stage") = "after_optimizations",
        py::arg("layout_candidates") = 0, py::arg("seed") = 1,
        py::arg("mark_absent_dimensions") = false,
        "Ingests release .npz files, raw dumps or HLO text (files or directory trees) into one "
        "dataset file, as `tpugraphs ingest`. mark_absent_dimensions: -1 instead of 0 in the "
        "node features' slots beyond each per-dimension list (docs/ingest.md). Returns the "
        "summary as a dict.");
  m.def("export", &Export, py::arg("dataset"), py::arg("output_dir"),
        py::arg("collections") = std::vector<std::string>{},
        py::arg("splits") = std::vector<std::string>{},
        py::arg("graphs") = std::vector<std::string>{}, py::arg("compress") = true,
        py::arg("threads") = 0,
        "Writes the graphs of a dataset as release-format .npz files, as `tpugraphs export`. "
        "Returns the written paths.");

  py::class_<PyGraph>(m, "Graph",
                      "One graph of a Dataset. Arrays are numpy views of the graph's memory, "
                      "named, typed and shaped as in the release .npz files.")
      .def_property_readonly("name", [](const PyGraph& g) { return g.graph.name; })
      .def_property_readonly("collection", [](const PyGraph& g) { return g.graph.collection; })
      .def_property_readonly("split", [](const PyGraph& g) { return g.graph.split; })
      .def_property_readonly(
          "kind", [](const PyGraph& g) { return std::string(TaskKindName(g.graph.kind)); })
      .def_property_readonly("index", [](const PyGraph& g) { return g.index; })
      .def_property_readonly("num_nodes", [](const PyGraph& g) { return g.graph.num_nodes(); })
      .def_property_readonly("num_edges", [](const PyGraph& g) { return g.graph.num_edges(); })
      .def_property_readonly("num_configs", [](const PyGraph& g) { return g.graph.num_configs; })
      .def_property_readonly("num_config_nodes",
                             [](const PyGraph& g) { return g.graph.num_config_nodes(); })
      .def_property_readonly(
          "node_feat",
          [](py::object self) {
            const Graph& g = self.cast<const PyGraph&>().graph;
            return View({g.num_nodes(), kNodeFeatureCount}, g.node_feat.data(), self);
          })
      .def_property_readonly("node_opcode",
                             [](py::object self) {
                               const Graph& g = self.cast<const PyGraph&>().graph;
                               return View({g.num_nodes()}, g.node_opcode.data(), self);
                             })
      .def_property_readonly("edge_index",
                             [](py::object self) {
                               const Graph& g = self.cast<const PyGraph&>().graph;
                               return View({g.num_edges(), 2}, g.edge_index.data(), self);
                             })
      .def_property_readonly("config_runtime",
                             [](py::object self) {
                               const Graph& g = self.cast<const PyGraph&>().graph;
                               return View({g.num_configs}, g.config_runtime.data(), self);
                             })
      .def_property_readonly(
          "config_feat",
          [](py::object self) {
            const PyGraph& pg = self.cast<const PyGraph&>();
            pg.RequireKind(TaskKind::kTile, "config_feat");
            const Graph& g = pg.graph;
            return View({g.num_configs, kTileConfigFeatureCount}, g.config_feat.data(), self);
          })
      .def_property_readonly("config_runtime_normalizers",
                             [](py::object self) {
                               const PyGraph& pg = self.cast<const PyGraph&>();
                               pg.RequireKind(TaskKind::kTile, "config_runtime_normalizers");
                               const Graph& g = pg.graph;
                               return View({g.num_configs}, g.config_runtime_normalizers.data(),
                                           self);
                             })
      .def_property_readonly("node_config_ids",
                             [](py::object self) {
                               const PyGraph& pg = self.cast<const PyGraph&>();
                               pg.RequireKind(TaskKind::kLayout, "node_config_ids");
                               const Graph& g = pg.graph;
                               return View({g.num_config_nodes()}, g.node_config_ids.data(), self);
                             })
      .def_property_readonly("node_splits",
                             [](py::object self) {
                               const PyGraph& pg = self.cast<const PyGraph&>();
                               pg.RequireKind(TaskKind::kLayout, "node_splits");
                               const Graph& g = pg.graph;
                               return View({1, static_cast<int64_t>(g.node_splits.size())},
                                           g.node_splits.data(), self);
                             })
      .def_property_readonly("node_config_feat", &PyGraph::NodeConfigFeat,
                             "Every configuration's layout values as the release stores them, "
                             "float32 [c, nc, 18]. Read from the file on each access.")
      .def("layout_config_feat", &PyGraph::LayoutConfigFeat, py::arg("indices") = py::none(),
           "Layout values of the given configurations (all when None), int8 [k, nc, 18], in the "
           "order asked (repeats allowed). Only the file blocks holding them are decoded.")
      .def_property_readonly("config_node_names",
                             [](const PyGraph& g) { return g.graph.config_node_names; })
      .def_property_readonly(
          "absent_dimensions_marked",
          [](const PyGraph& g) { return g.graph.absent_dimensions_marked; },
          "True when node_feat holds -1 in the slots beyond each per-dimension list "
          "(ingest(mark_absent_dimensions=True)); False for the official features.")
      .def_property_readonly("normalized_runtime", &PyGraph::NormalizedRuntime,
                             "Runtimes as the metrics use them, float64 [c]: runtime / normalizer "
                             "for tile graphs, the runtime for layout graphs.")
      .def("__repr__", [](const PyGraph& g) {
        return "<tpugraphs.Graph " + g.graph.collection + ":" + g.graph.name + " split='" +
               g.graph.split + "' nodes=" + std::to_string(g.graph.num_nodes()) +
               " configs=" + std::to_string(g.graph.num_configs) + ">";
      });

  py::class_<PyDataset>(m, "Dataset",
                        "A dataset file (.tpug) opened for reading; graphs are decoded one at a "
                        "time, on demand.")
      .def(py::init(&PyDataset::Open), py::arg("path"))
      .def_property_readonly("path", [](const PyDataset& d) { return d.reader->path(); })
      .def_property_readonly("collections", &PyDataset::Collections)
      .def("__len__", [](const PyDataset& d) { return d.reader->num_graphs(); })
      .def(
          "info",
          [](const PyDataset& d, int64_t i) {
            i = d.CheckIndex(i);
            return InfoDict(d.reader->info(i), i);
          },
          py::arg("index"), "What the index says about graph `index` (nothing is decoded).")
      .def("graph_at", &PyDataset::Read, py::arg("index"), "Decodes graph `index`.")
      .def(
          "graph",
          [](const PyDataset& d, const std::string& name, const std::string& collection) {
            return d.Read(d.Find(name, collection));
          },
          py::arg("name"), py::arg("collection") = "",
          "The graph named `name` (collection= when the name is in several collections).")
      .def("indices", &PyDataset::Select, py::arg("collection") = "", py::arg("split") = "",
           "Indices of the graphs of this collection and split (empty string: any).")
      .def("__repr__", [](const PyDataset& d) {
        return "<tpugraphs.Dataset '" + d.reader->path() +
               "' graphs=" + std::to_string(d.reader->num_graphs()) + ">";
      });

  py::class_<PyModel>(m, "Model",
                      "A trained model file (single model or ensemble), or several model files "
                      "combined as `tpugraphs predict --model A --model B --ensemble` does.")
      .def(py::init([](py::object paths, const std::string& ensemble, int threads,
                       int64_t memory_per_thread) {
             std::vector<std::string> list;
             if (py::isinstance<py::str>(paths) || py::hasattr(paths, "__fspath__")) {
               list.push_back(py::str(paths).cast<std::string>());
             } else {
               for (py::handle p : paths) list.push_back(py::str(p).cast<std::string>());
             }
             return PyModel::Load(list, ensemble, threads, memory_per_thread);
           }),
           py::arg("path"), py::arg("ensemble") = "zscore", py::arg("threads") = 0,
           py::arg("memory_per_thread") = train::kDefaultScoringMemoryMb)
      .def_property_readonly("name", [](const PyModel& m) { return m.scorer->name(); })
      .def("score", &PyModel::Score, py::arg("graph"), py::arg("indices") = py::none(),
           "Scores of the given configurations of `graph` (all when None), float64; lower = "
           "predicted faster. Equal to `tpugraphs predict --format scores`.");

  py::module_ metrics = m.def_submodule("_metrics", "ranking metrics (docs/metrics.md)");
  metrics.def(
      "kendall_tau", [](py::object s, py::object r) { return Metric(s, r, eval::KendallTauB); },
      py::arg("scores"), py::arg("runtimes"));
  metrics.def(
      "opa", [](py::object s, py::object r) { return Metric(s, r, eval::OrderedPairAccuracy); },
      py::arg("scores"), py::arg("runtimes"));
  metrics.def(
      "top_k_error",
      [](py::object s, py::object r, int64_t k) {
        if (k < 1) throw Error("k must be at least 1, got " + std::to_string(k));
        return Metric(s, r, [k](std::span<const double> a, std::span<const double> b) {
          return eval::TopKError(a, b, k);
        });
      },
      py::arg("scores"), py::arg("runtimes"), py::arg("k"));
}

}  // namespace
}  // namespace tpugraphs::python

PYBIND11_MODULE(_tpugraphs, m) { tpugraphs::python::Bind(m); }
