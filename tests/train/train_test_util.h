// Small synthetic graphs and datasets for the train tests (built in the tests, no fixtures).
#ifndef TPUGRAPHS_TESTS_TRAIN_TRAIN_TEST_UTIL_H_
#define TPUGRAPHS_TESTS_TRAIN_TRAIN_TEST_UTIL_H_

#include <cmath>
#include <string>
#include <vector>

#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/rng.h"
#include "tpugraphs/eval/evaluate.h"
#include "tpugraphs/io/dataset.h"
#include "tpugraphs/train_config.pb.h"

namespace tpugraphs::train::testing {

// A random DAG of n nodes with plausible raw features. Runtimes follow a simple rule of the
// config values so that a model can learn something.
inline Graph SyntheticGraph(TaskKind kind, const std::string& name, const std::string& split,
                            int64_t n, int64_t configs, uint64_t seed) {
  Rng rng(seed);
  Graph g;
  g.name = name;
  g.split = split;
  g.kind = kind;
  g.collection = kind == TaskKind::kTile ? "tile:synth" : "layout:synth:random";
  for (int64_t i = 0; i < n; ++i) {
    g.node_opcode.push_back(static_cast<uint8_t>(1 + rng.UniformInt(20)));
    for (int f = 0; f < kNodeFeatureCount; ++f) {
      g.node_feat.push_back(f % 7 == 0 ? static_cast<float>(rng.UniformInt(128)) : 0.0f);
    }
  }
  for (int64_t i = 1; i < n; ++i) {
    g.edge_index.push_back(i);
    g.edge_index.push_back(static_cast<int64_t>(rng.UniformInt(i)));
  }
  g.num_configs = configs;
  const double scale = 1.0 + static_cast<double>(rng.UniformInt(5));
  if (kind == TaskKind::kTile) {
    for (int64_t c = 0; c < configs; ++c) {
      double cost = 0;
      for (int f = 0; f < kTileConfigFeatureCount; ++f) {
        float v = static_cast<float>(rng.UniformInt(8));
        g.config_feat.push_back(v);
        if (f < 4) cost += (f + 1) * v;
      }
      g.config_runtime.push_back(static_cast<int64_t>(1000 * scale * (10 + cost)));
      g.config_runtime_normalizers.push_back(static_cast<int64_t>(1000 * scale));
    }
  } else {
    g.node_config_ids = {0, n / 2, n - 1};
    g.node_splits = {0, n};
    for (int64_t c = 0; c < configs; ++c) {
      double cost = 0;
      for (int j = 0; j < 3; ++j) {
        for (int f = 0; f < kLayoutConfigFeatureCount; ++f) {
          int v = f < 6 ? static_cast<int>(rng.UniformInt(5)) - 1 : -1;
          g.node_config_feat.push_back(static_cast<int8_t>(v));
          if (f < 2) cost += (j + 1) * (v + 1);
        }
      }
      g.config_runtime.push_back(static_cast<int64_t>(1e6 * scale * (10 + cost)));
    }
  }
  return g;
}

// A tiny model and budget for trainer tests: 3 epochs of 3 graphs x 8 configurations, hidden
// width 8, two layers, seed 17.
inline TrainConfig SmallTrainConfig(const std::string& dataset, const std::string& output) {
  TrainConfig c;
  c.set_dataset(dataset);
  c.set_output(output);
  c.set_epochs(3);
  c.set_batch_graphs(3);
  c.set_configs_per_graph(8);
  c.set_warmup_steps(2);
  c.set_learning_rate(3e-3);
  c.mutable_model()->set_hidden_dim(8);
  c.mutable_model()->set_num_layers(2);
  c.mutable_model()->set_opcode_embedding_dim(4);
  c.mutable_model()->set_head_hidden_dim(8);
  c.set_seed(17);
  return c;
}

// The Kendall tau of each graph of `split`, as `evaluate` computes it with `scorer`.
inline StatusOr<std::vector<double>> EvaluatedKendalls(const io::DatasetReader& reader,
                                                       eval::ConfigScorer& scorer,
                                                       const std::string& split) {
  eval::EvaluateOptions options;
  if (!split.empty()) options.filter.splits = {split};
  options.progress = false;
  TPUG_ASSIGN_OR_RETURN(eval::EvaluationReport report, eval::Evaluate(reader, scorer, options));
  std::vector<double> out;
  for (const auto& g : report.graphs) out.push_back(g.kendall_tau);
  return out;
}

// Writes `graphs` train + `valid` valid graphs of one task to `path`.
inline Status WriteSyntheticDataset(const std::string& path, TaskKind kind, int train, int valid,
                                    int64_t n = 16, int64_t configs = 24) {
  TPUG_ASSIGN_OR_RETURN(auto w, io::DatasetWriter::Create(path));
  for (int i = 0; i < train + valid; ++i) {
    Graph g = SyntheticGraph(kind, std::string("g").append(std::to_string(i)),
                             i < train ? "train" : "valid", n + i % 5, configs, 1000 + i);
    TPUG_RETURN_IF_ERROR(w->Add(g));
  }
  return w->Finish();
}

}  // namespace tpugraphs::train::testing

#endif  // TPUGRAPHS_TESTS_TRAIN_TRAIN_TEST_UTIL_H_
