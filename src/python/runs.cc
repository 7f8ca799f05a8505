// tpugraphs.train, tune, evaluate and synth: the commands' library calls with Python keywords in
// place of flags (docs/python.md, "Running the commands"). A keyword is a field of the command's
// config proto (TrainConfig and its model/loss messages, TuneConfig, SynthConfig), set through
// common/proto_fields.h exactly as the command line's flag of the same name; the results are
// what the command prints, as Python values. Every call releases the GIL while it works; the
// library's log and progress lines go to the `logging` logger "tpugraphs".
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <string>
#include <vector>

#include "bindings.h"
#include "tpugraphs/common/logging.h"
#include "tpugraphs/common/proto_fields.h"
#include "tpugraphs/common/thread_pool.h"
#include "tpugraphs/eval/evaluate.h"
#include "tpugraphs/io/dataset.h"
#include "tpugraphs/synth/synth.h"
#include "tpugraphs/train/model_scorer.h"
#include "tpugraphs/train/train_config.h"
#include "tpugraphs/train/trainer.h"
#include "tpugraphs/tune/tune.h"

namespace py = pybind11;

namespace tpugraphs::python {
namespace {

// The text a keyword's value stands for, as the flag of the same name takes it.
std::string ValueText(py::handle v) {
  if (py::isinstance<py::bool_>(v)) return v.cast<bool>() ? "true" : "false";
  if (py::isinstance<py::int_>(v)) return std::to_string(v.cast<long long>());
  if (py::isinstance<py::float_>(v)) return py::repr(v).cast<std::string>();
  if (py::isinstance<py::str>(v)) return v.cast<std::string>();
  // os.PathLike and anything else with a string form (a pathlib.Path).
  return py::str(v).cast<std::string>();
}

// Sets the fields named by `kwargs` in `config`; `skip` keywords are the caller's own.
void SetFields(google::protobuf::Message* config, const py::kwargs& kwargs,
               const std::vector<std::string>& skip) {
  for (const auto& [key, value] : kwargs) {
    const std::string name = key.cast<std::string>();
    if (std::find(skip.begin(), skip.end(), name) != skip.end() || value.is_none()) continue;
    const ProtoFieldPath path = FindFieldByKeyword(config->GetDescriptor(), name);
    if (path.field == nullptr || path.field->message_type() != nullptr || name == "threads") {
      throw Error("unknown keyword '" + name + "' (the keywords are the fields of " +
                      config->GetDescriptor()->name() + ", as the command's flags name them)",
                  StatusCode::kUsage);
    }
    const bool sequence = py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value);
    if (sequence != path.field->is_repeated()) {
      throw Error(name + (sequence ? " takes one value, not a list" : " takes a list of values"),
                  StatusCode::kUsage);
    }
    if (!sequence) {
      Check(SetFieldFromText(config, path, name, ValueText(value)));
      continue;
    }
    google::protobuf::Message* holder =
        path.parent == nullptr ? config
                               : config->GetReflection()->MutableMessage(config, path.parent);
    holder->GetReflection()->ClearField(holder, path.field);
    for (py::handle item : value) Check(SetFieldFromText(config, path, name, ValueText(item)));
  }
}

int ThreadsOf(const py::kwargs& kwargs) {
  return kwargs.contains("threads") ? kwargs["threads"].cast<int>() : 0;
}

py::object JsonLoads(const std::string& text) {
  return py::module_::import("json").attr("loads")(text);
}

py::dict TrainResultDict(const train::TrainResult& r) {
  py::dict d;
  if (r.stopped) {
    d["stopped"] = true;
    d["checkpoint"] = r.checkpoint;
    d["steps"] = r.steps_run;
    return d;
  }
  d["stopped"] = false;
  d["model"] = r.output;
  d["epochs"] = r.epochs_run;
  d["best_epoch"] = r.best_epoch;
  d["metric"] = r.metric_name;
  d["best_metric"] = r.best_metric;
  d["member_metrics"] = r.member_metrics;
  d["held_out_metric"] =
      std::isnan(r.held_out_metric) ? py::object(py::none()) : py::float_(r.held_out_metric);
  if (!r.reference_name.empty()) {
    d["reference"] = r.reference_name;
    d["reference_metric"] = r.reference_metric;
  }
  d["epoch_metric"] = r.epoch_metric;
  d["epoch_loss"] = r.epoch_loss;
  d["steps"] = r.steps_run;
  return d;
}

py::dict Train(const py::kwargs& kwargs) {
  TrainConfig config;
  if (kwargs.contains("config") && !kwargs["config"].is_none()) {
    config = Unwrap(train::ReadTrainConfigFile(ValueText(kwargs["config"])));
  }
  SetFields(&config, kwargs, {"config", "threads"});
  config.set_threads(ThreadsOf(kwargs));
  train::TrainResult result;
  {
    py::gil_scoped_release unlocked;
    result = Unwrap(train::Train(config));
  }
  return TrainResultDict(result);
}

py::list Tune(const py::kwargs& kwargs) {
  TuneConfig config;
  SetFields(&config, kwargs, {"threads"});
  config.set_threads(ThreadsOf(kwargs));
  tune::TuneResult result;
  {
    py::gil_scoped_release unlocked;
    result = Unwrap(tune::Tune(config, /*progress=*/true));
  }
  py::list out;
  for (const auto& g : result.graphs) out.append(JsonLoads(g.json));
  return out;
}

py::object Evaluate(const std::string& data, py::object model, const std::string& predictions,
                    const std::string& baseline, const std::string& split, py::object collection,
                    const std::string& eval_indices, bool per_graph, const std::string& ensemble,
                    uint64_t seed, int threads, int64_t memory_per_thread) {
  eval::ScorerSpec spec;
  if (!model.is_none()) {
    if (py::isinstance<py::str>(model) || !py::hasattr(model, "__iter__")) {
      spec.models.push_back(ValueText(model));
    } else {
      for (py::handle m : model) spec.models.push_back(ValueText(m));
    }
  }
  spec.predictions = predictions;
  spec.baseline = baseline;
  spec.ensemble = ensemble;
  spec.seed = seed;
  spec.model_options.threads = threads;
  spec.model_options.memory_mb = memory_per_thread;
  eval::EvaluateOptions options;
  if (!collection.is_none()) {
    if (py::isinstance<py::str>(collection)) {
      options.filter.collections.push_back(collection.cast<std::string>());
    } else {
      for (py::handle c : collection) options.filter.collections.push_back(ValueText(c));
    }
  }
  for (const auto& c : options.filter.collections) Check(ValidateCollection(c));
  if (!split.empty()) {
    Check(ValidateSplit(split));
    options.filter.splits = {split};
  }
  options.threads = threads;
  std::string json;
  {
    py::gil_scoped_release unlocked;
    std::unique_ptr<eval::EvalIndices> indices;
    if (!eval_indices.empty()) {
      indices = std::make_unique<eval::EvalIndices>(Unwrap(eval::EvalIndices::Load(eval_indices)));
    }
    options.eval_indices = indices.get();
    auto reader = Unwrap(io::DatasetReader::Open(data));
    auto scorer = Unwrap(eval::MakeScorer(spec, reader.get()));
    const eval::EvaluationReport report = Unwrap(eval::Evaluate(*reader, *scorer, options));
    json = eval::FormatReportJson(report, per_graph);
  }
  return JsonLoads(json);
}

py::list Synth(const py::kwargs& kwargs) {
  SynthConfig config = synth::DefaultSynthConfig();  // the command's defaults
  SetFields(&config, kwargs, {"threads", "noise_free_costs"});
  const std::string costs =
      kwargs.contains("noise_free_costs") && !kwargs["noise_free_costs"].is_none()
          ? ValueText(kwargs["noise_free_costs"])
          : "";
  if (config.release_shaped() > 0) {
    throw Error("release_shaped trees are written by `tpugraphs synth --release-shaped`",
                StatusCode::kUsage);
  }
  if (config.output().empty()) throw Error("synth needs output=", StatusCode::kUsage);
  std::vector<synth::SynthGraphSummary> summaries;
  {
    py::gil_scoped_release unlocked;
    Status valid = synth::ValidateSynthConfig(&config);
    if (!valid.ok()) throw Error("usage: " + valid.message(), StatusCode::kUsage);
    ThreadPool pool(ThreadsOf(kwargs));
    summaries = Unwrap(synth::RunSynth(config, &pool));
    if (!costs.empty()) Check(synth::WriteNoiseFreeCosts(config, summaries, costs));
  }
  py::list out;
  for (const auto& s : summaries) {
    py::dict d;
    d["path"] = s.path;
    d["split"] = s.split;
    d["name"] = s.name;
    d["nodes"] = s.nodes;
    d["configurable"] = s.configurable;
    d["configs"] = s.configs;
    d["error_runs"] = s.error_runs;
    d["default_ns"] = s.default_ns;
    d["best_ns"] = s.best_ns;
    d["worst_ns"] = s.worst_ns;
    out.append(d);
  }
  return out;
}

// The library's log records and progress lines as records of logging.getLogger("tpugraphs").
void ForwardLogToPython() {
  SetLogHandler(
      [](int level, const std::string& message) {
        if (!Py_IsInitialized()) return;
        py::gil_scoped_acquire locked;
        static const int kPythonLevel[] = {5, 10, 20, 30, 40, 50, 50};
        try {
          py::module_::import("logging")
              .attr("getLogger")("tpugraphs")
              .attr("log")(kPythonLevel[std::clamp(level, 0, 6)], message);
        } catch (const py::error_already_set&) {
          // A broken handler on the Python side must not stop the run.
        }
      },
      /*min_level=*/2);
}

}  // namespace

void BindRuns(py::module_& m) {
  ForwardLogToPython();
  m.def("train", &Train,
        "Trains a model as `tpugraphs train` and returns what it prints, as a dict. Keywords: "
        "config= (a TrainConfig text proto, as --config), threads= (as -j), and any TrainConfig "
        "field by name (dataset=, output=, epochs=, hidden_dim=, ...), as the flag of the same "
        "name; keywords override the config file.");
  m.def("tune", &Tune,
        "Tunes graphs as `tpugraphs tune`; keywords are TuneConfig's fields (data=, model=, "
        "graph=[...], output=, budget=, ...) and threads=. Returns one dict per graph: the JSON "
        "`tune --json` prints.");
  m.def("evaluate", &Evaluate, py::arg("data"), py::arg("model") = py::none(),
        py::arg("predictions") = "", py::arg("baseline") = "", py::arg("split") = "",
        py::arg("collection") = py::none(), py::arg("eval_indices") = "",
        py::arg("per_graph") = false, py::arg("ensemble") = "zscore", py::arg("seed") = 1,
        py::arg("threads") = 0, py::arg("memory_per_thread") = train::kDefaultScoringMemoryMb,
        "Ranking metrics as `tpugraphs evaluate --json`, as a dict. model= is a path or a list "
        "of paths (an ensemble).");
  m.def("synth", &Synth,
        "Writes synthetic programs as `tpugraphs synth`; keywords are SynthConfig's fields "
        "(output=, task=, graphs=, min_nodes=, splits=[...], seed=, ...), noise_free_costs= "
        "(a path, as --noise-free-costs) and threads=. Returns one dict per graph (the table "
        "synth prints).");
}

}  // namespace tpugraphs::python
