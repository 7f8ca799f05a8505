// tpugraphs_dump_batch: writes everything an independent re-implementation of the layout model
// needs to check one batch (docs/twin.md): the graph as the model sees it (after pruning, with the
// transformed node features), the configurations, the parameters with their block layout, and our
// scores, loss and parameter gradients in float (the CostModel path the trainer uses) and in
// double (the same network instantiated in double, shared and naive computation).
//
// With --curve it also writes what the trainer did on the graph (it must be the only training graph
// of the model's run): the initial parameters, the held-out split, the configurations sampled at
// every step, the learning rate per step, the optimizer settings and the per-epoch validation
// Kendall tau recorded in the model file, so tools/reference/torch_twin.py can train the same way
// and compare the learning curves.
//
// A diagnostic program, not part of the `tpugraphs` command line.
#include <google/protobuf/text_format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "tpugraphs/common/json_util.h"
#include "tpugraphs/common/rng.h"
#include "tpugraphs/io/dataset.h"
#include "tpugraphs/io/npz.h"
#include "tpugraphs/model/cost_model.h"
#include "tpugraphs/model/gnn.h"
#include "tpugraphs/model/losses.h"
#include "tpugraphs/model/pruning.h"
#include "tpugraphs/train/config_sampling.h"
#include "tpugraphs/train/model_file.h"
#include "tpugraphs/train/optimizer.h"
#include "tpugraphs/train/train_config.h"

namespace tpugraphs {
namespace {

using model::internal::Gnn;
using model::internal::GnnInputs;
using model::internal::GnnTape;
using model::internal::GraphStructure;

struct Options {
  std::string model_path, dataset_path, graph = "0", output, loss_text, configs;
  int num_configs = 32;
  int64_t seed = 1;
  bool curve = false;
};

// ComputeLoss in double (scores and gradient in double).
double LossDouble(const LossSpec& spec, const std::vector<double>& s, const double* runtimes,
                  std::vector<double>* ds) {
  const int64_t k = static_cast<int64_t>(s.size());
  ds->assign(k, 0.0);
  double loss = 0.0;
  if (spec.pairwise_hinge_weight() != 0) {
    loss += spec.pairwise_hinge_weight() *
            model::PairwiseHingeLoss(s.data(), runtimes, k, spec.hinge_margin(),
                                     spec.pairwise_hinge_weight(), ds->data(),
                                     spec.hinge_pair_weighting(), spec.hinge_noise());
  }
  if (spec.listmle_weight() != 0) {
    loss += spec.listmle_weight() * model::ListMleLoss(s.data(), runtimes, k,
                                                       spec.listmle_temperature(),
                                                       spec.listmle_weight(), ds->data());
  }
  if (spec.mse_weight() != 0) {
    loss += spec.mse_weight() * model::MseLoss(s.data(), runtimes, k, spec.mse_target(),
                                               spec.mse_scale(), spec.mse_weight(), ds->data());
  }
  return loss;
}

// Forward + loss + backward of the network in double on `gs`.
struct DoubleResult {
  std::vector<double> scores, dscores, grad;
  double loss = 0;
};
DoubleResult RunDouble(const ModelSpec& spec, const LossSpec& loss, const GraphStructure& gs,
                       const std::vector<float>& node_feat, const std::vector<int8_t>& values,
                       int64_t k, const std::vector<float>& params, const double* runtimes) {
  Gnn<double> gnn(spec, TaskKind::kLayout);
  std::vector<double> p(params.begin(), params.end());
  std::vector<double> feat(node_feat.begin(), node_feat.end());
  GnnInputs<double> in;
  in.node_feat = feat.data();
  in.k = k;
  in.layout_cfg = values.data();
  GnnTape<double> tape;
  DoubleResult r;
  r.scores.assign(k, 0.0);
  gnn.Forward(p.data(), gs, in, r.scores.data(), &tape);
  r.loss = LossDouble(loss, r.scores, runtimes, &r.dscores);
  r.grad.assign(p.size(), 0.0);
  gnn.Backward(p.data(), gs, in, tape, r.dscores.data(), r.grad.data());
  return r;
}

double MaxRelDiff(const double* a, const double* b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    num = std::max(num, std::fabs(a[i] - b[i]));
    den = std::max(den, std::fabs(b[i]));
  }
  return den > 0 ? num / den : num;
}

std::vector<double> ToDouble(const std::vector<float>& x) { return {x.begin(), x.end()}; }

std::string SpecJson(const ModelSpec& s) {
  char buf[2048];
  std::snprintf(
      buf, sizeof(buf),
      "{\"hidden_dim\": %d, \"num_layers\": %d, \"opcode_embedding_dim\": %d, "
      "\"num_opcodes\": %d, \"layout_value_embedding_dim\": %d, \"layout_value_max\": %d, "
      "\"aggregation\": %d, \"activation\": %d, \"leaky_relu_slope\": %.17g, \"residual\": %s, "
      "\"layer_norm\": %s, \"layer_norm_epsilon\": %.17g, \"pool_mean\": %s, \"pool_max\": %s, "
      "\"config_pooling\": %d, \"head_hidden_dim\": %d, \"head_layers\": %d, "
      "\"prune_hops\": %d, \"segment_size\": %d, \"layout_tensor_features\": %s, "
      "\"config_node_head\": %d, \"config_node_head_pooling\": %d}",
      s.hidden_dim(), s.num_layers(), s.opcode_embedding_dim(), s.num_opcodes(),
      s.layout_value_embedding_dim(), s.layout_value_max(), static_cast<int>(s.aggregation()),
      static_cast<int>(s.activation()), static_cast<double>(s.leaky_relu_slope()),
      s.residual() ? "true" : "false", s.layer_norm() ? "true" : "false",
      static_cast<double>(s.layer_norm_epsilon()), s.pool_mean() ? "true" : "false",
      s.pool_max() ? "true" : "false", static_cast<int>(s.config_pooling()), s.head_hidden_dim(),
      s.head_layers(), s.prune_hops(), s.segment_size(),
      s.layout_tensor_features() ? "true" : "false", s.config_node_head(),
      static_cast<int>(s.config_node_head_pooling()));
  return buf;
}

std::string LossJson(const LossSpec& l) {
  char buf[1024];
  std::snprintf(buf, sizeof(buf),
                "{\"pairwise_hinge_weight\": %.17g, \"hinge_margin\": %.17g, "
                "\"hinge_pair_weighting\": %d, \"listmle_weight\": %.17g, "
                "\"listmle_temperature\": %.17g, \"mse_weight\": %.17g, \"mse_target\": %d, "
                "\"mse_scale\": %.17g, \"hinge_noise\": %.17g}",
                static_cast<double>(l.pairwise_hinge_weight()),
                static_cast<double>(l.hinge_margin()), static_cast<int>(l.hinge_pair_weighting()),
                static_cast<double>(l.listmle_weight()),
                static_cast<double>(l.listmle_temperature()), static_cast<double>(l.mse_weight()),
                static_cast<int>(l.mse_target()), l.mse_scale(), l.hinge_noise());
  return buf;
}

Status AddJson(io::NpzWriter* w, const std::string& key, const std::string& json) {
  std::vector<uint8_t> bytes(json.begin(), json.end());
  return w->Add<uint8_t>(key, {static_cast<int64_t>(bytes.size())}, bytes.data());
}

// The trainer's graph selection (train/training_data.cc): position of graph `index` among the
// training graphs of the run, and how many there are.
void TrainPosition(const io::DatasetReader& r, const TrainConfig& c, int64_t index, int64_t* pos,
                   int64_t* count) {
  *pos = -1;
  *count = 0;
  for (int64_t i = 0; i < r.num_graphs(); ++i) {
    const io::GraphInfo& info = r.info(i);
    if (info.collection != c.collection()) continue;
    if (!c.train_split().empty() && info.split != c.train_split()) continue;
    if (info.num_configs < c.min_configs()) continue;
    if (i == index) *pos = *count;
    ++*count;
  }
}

Status WriteCurve(const train::LoadedModel& lm, const io::DatasetReader& reader, int64_t index,
                  const Graph& g, io::NpzWriter* w, std::string* json) {
  const TrainConfig& c = lm.file.train_config();
  if (c.gst() != TrainConfig::GST_OFF) {
    return InvalidArgumentError("--curve: GST runs are not supported");
  }
  int64_t pos = -1, count = 0;
  TrainPosition(reader, c, index, &pos, &count);
  if (pos < 0 || count != 1) {
    return InvalidArgumentError(
        "--curve needs the graph to be the only training graph of the model's run (found " +
        std::to_string(count) + " training graphs; graph is " +
        (pos < 0 ? "not among them" : "one of them") + ")");
  }
  const uint64_t seed = static_cast<uint64_t>(c.seed());
  // Holdout split and validation cap, as the trainer draws them.
  std::vector<int64_t> pool, eval;
  if (c.holdout_config_fraction() > 0) {
    TPUG_ASSIGN_OR_RETURN(std::vector<uint64_t> hashes, train::HashGraphConfigs(g));
    train::ConfigSplit split = train::SplitByDistinctConfig(hashes, c.holdout_config_fraction(),
                                                            DeriveSeed(seed, "holdout", pos));
    pool = split.train;
    eval = split.holdout;
    if (c.valid_max_configs() > 0 && static_cast<int64_t>(eval.size()) > c.valid_max_configs()) {
      eval = train::SampleConfigs(eval, c.valid_max_configs(), DeriveSeed(seed, "valid", pos));
      std::sort(eval.begin(), eval.end());
    }
  } else {
    return InvalidArgumentError("--curve needs a run with --holdout-config-fraction > 0");
  }
  const int64_t steps = c.epochs();  // one graph: one step per epoch
  const int64_t per = std::min<int64_t>(c.configs_per_graph(), static_cast<int64_t>(pool.size()));
  std::vector<int64_t> picks;
  std::vector<double> lrs;
  const train::LrSchedule schedule = train::LrScheduleOf(c, steps);
  for (int64_t e = 0; e < steps; ++e) {
    std::vector<int64_t> p = train::SampleConfigs(
        pool, c.configs_per_graph(), DeriveSeed(seed, "sample", static_cast<uint64_t>(e), pos));
    picks.insert(picks.end(), p.begin(), p.end());
    lrs.push_back(schedule.LearningRate(e));
  }
  // Initial parameters: the trainer's InitParameters after the transform fit.
  TPUG_ASSIGN_OR_RETURN(auto init, model::CostModel::Create(lm.model->spec(), TaskKind::kLayout));
  FeatureTransformProto tp;
  lm.model->transform().ToProto(&tp);
  TPUG_RETURN_IF_ERROR(init->transform().FromProto(tp));
  init->InitParameters(DeriveSeed(seed, "init"));
  std::vector<double> runtimes(g.num_configs);
  for (int64_t i = 0; i < g.num_configs; ++i) runtimes[i] = g.NormalizedRuntime(i);
  const int64_t nc = g.num_config_nodes();
  std::vector<double> ours(lm.file.summary().epoch_metric().begin(),
                           lm.file.summary().epoch_metric().end());
  TPUG_RETURN_IF_ERROR(
      w->Add<float>("curve_init_params", {init->num_parameters()}, init->parameters()));
  TPUG_RETURN_IF_ERROR(
      w->Add<int64_t>("curve_train_pool", {static_cast<int64_t>(pool.size())}, pool.data()));
  TPUG_RETURN_IF_ERROR(
      w->Add<int64_t>("curve_valid", {static_cast<int64_t>(eval.size())}, eval.data()));
  TPUG_RETURN_IF_ERROR(w->Add<int64_t>("curve_steps", {steps, per}, picks.data()));
  TPUG_RETURN_IF_ERROR(w->Add<double>("curve_lr", {steps}, lrs.data()));
  TPUG_RETURN_IF_ERROR(w->Add<double>("all_runtimes", {g.num_configs}, runtimes.data()));
  TPUG_RETURN_IF_ERROR(
      w->Add<int8_t>("all_config_values", {g.num_configs, nc, 18}, g.node_config_feat.data()));
  TPUG_RETURN_IF_ERROR(
      w->Add<double>("ours_valid_kendall", {static_cast<int64_t>(ours.size())}, ours.data()));
  // After how many steps `params` was taken: a checkpoint holds the last epoch's parameters, a
  // model file the best epoch's.
  const int64_t params_step = lm.file.has_checkpoint() ? lm.file.checkpoint().epochs_done()
                                                       : lm.file.summary().best_epoch();
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "{\"optimizer\": \"%s\", \"beta1\": %.17g, \"beta2\": %.17g, \"epsilon\": %.17g, "
                "\"weight_decay\": %.17g, \"clip_norm\": %.17g, \"best_epoch\": %d, "
                "\"epochs_run\": %d, \"params_step\": %lld, \"seed\": %lld}",
                c.optimizer() == TrainConfig::OPTIMIZER_ADAM ? "adam" : "adamw", c.beta1(),
                c.beta2(), c.adam_epsilon(), c.weight_decay(), c.clip_norm(),
                lm.file.summary().best_epoch(), lm.file.summary().epochs_run(),
                static_cast<long long>(params_step), static_cast<long long>(c.seed()));
  *json = buf;
  std::fprintf(stderr, "curve: %lld steps of %lld configs, %zu training and %zu held-out configs\n",
               static_cast<long long>(steps), static_cast<long long>(per), pool.size(),
               eval.size());
  return Status::Ok();
}

Status Run(const Options& o) {
  TPUG_ASSIGN_OR_RETURN(train::LoadedModel lm, train::LoadModel(o.model_path));
  const model::CostModel& m = *lm.model;
  if (lm.file.ensemble_size() > 0) {
    return InvalidArgumentError(o.model_path + ": holds an ensemble of " +
                                std::to_string(lm.file.ensemble_size() + 1) +
                                " models; the twin compares one (train one member alone with "
                                "--ensemble-member, docs/train.md)");
  }
  if (m.task() != TaskKind::kLayout) {
    return InvalidArgumentError(o.model_path + ": is a tile model; only layout models are dumped");
  }
  const ModelSpec& spec = m.spec();
  if (spec.config_loop_depth()) {
    return InvalidArgumentError(o.model_path + ": config_loop_depth is not supported by the twin");
  }
  if (spec.layout_flow_features()) {
    return InvalidArgumentError(o.model_path +
                                ": layout_flow_features is not supported by the twin");
  }
  if (spec.layout_size_features()) {
    return InvalidArgumentError(o.model_path +
                                ": layout_size_features is not supported by the twin");
  }
  if (spec.config_attention() > 0) {
    return InvalidArgumentError(o.model_path + ": config_attention is not supported by the twin");
  }
  if (spec.segment_size() > 0) {
    return InvalidArgumentError(o.model_path + ": segment_size > 0 (GST) is not supported");
  }
  LossSpec loss = lm.file.train_config().loss();
  if (!o.loss_text.empty() && !google::protobuf::TextFormat::ParseFromString(o.loss_text, &loss)) {
    return InvalidArgumentError("--loss: not a LossSpec text proto: " + o.loss_text);
  }
  TPUG_RETURN_IF_ERROR(model::ValidateLossSpec(loss));

  TPUG_ASSIGN_OR_RETURN(auto reader, io::DatasetReader::Open(o.dataset_path));
  int64_t index = -1;
  char* end = nullptr;
  const long long as_number = std::strtoll(o.graph.c_str(), &end, 10);
  if (!o.graph.empty() && *end == '\0') {
    index = as_number;
  } else {
    for (int64_t i = 0; i < reader->num_graphs(); ++i) {
      if (reader->info(i).name == o.graph) index = i;
    }
  }
  if (index < 0 || index >= reader->num_graphs()) {
    return NotFoundError(o.dataset_path + ": no graph " + o.graph);
  }
  TPUG_ASSIGN_OR_RETURN(Graph g, reader->ReadGraph(index, true));
  if (!g.is_layout()) return InvalidArgumentError("graph " + g.name + " is not a layout graph");

  // Configurations.
  std::vector<int64_t> configs;
  if (!o.configs.empty()) {
    size_t at = 0;
    while (at < o.configs.size()) {
      size_t comma = o.configs.find(',', at);
      if (comma == std::string::npos) comma = o.configs.size();
      const std::string item = o.configs.substr(at, comma - at);
      char* e = nullptr;
      const long long c = std::strtoll(item.c_str(), &e, 10);
      if (item.empty() || *e != '\0' || c < 0 || c >= g.num_configs) {
        return InvalidArgumentError("--configs: \"" + item + "\" is not a config index in [0, " +
                                    std::to_string(g.num_configs) + ")");
      }
      configs.push_back(c);
      at = comma + 1;
    }
  } else {
    std::vector<int64_t> all(g.num_configs);
    for (int64_t i = 0; i < g.num_configs; ++i) all[i] = i;
    configs = train::SampleConfigs(all, o.num_configs, DeriveSeed(o.seed, "twin"));
  }
  const int64_t k = static_cast<int64_t>(configs.size());
  if (k < 1) return InvalidArgumentError("no configurations to dump");

  // The graph as Prepare() makes it.
  Graph work = g;
  std::vector<int64_t> kept_nodes(g.num_nodes());
  for (int64_t i = 0; i < g.num_nodes(); ++i) kept_nodes[i] = i;
  if (spec.prune_hops() >= 0) {
    TPUG_ASSIGN_OR_RETURN(work,
                          model::PruneToConfigNeighbourhood(g, spec.prune_hops(), &kept_nodes));
  }
  const int64_t n = work.num_nodes(), nc = work.num_config_nodes();
  const model::FeatureTransform& tf = m.transform();
  TPUG_ASSIGN_OR_RETURN(
      GraphStructure gs,
      model::internal::BuildGraphStructure(
          spec, TaskKind::kLayout, work.node_opcode, work.edge_index, work.node_config_ids,
          tf.kept_node_column_ids(), tf.kept_config_column_ids(), false, "graph " + g.name));
  TPUG_ASSIGN_OR_RETURN(
      GraphStructure naive,
      model::internal::BuildGraphStructure(
          spec, TaskKind::kLayout, work.node_opcode, work.edge_index, work.node_config_ids,
          tf.kept_node_column_ids(), tf.kept_config_column_ids(), true, "graph " + g.name));
  if (spec.layout_tensor_features()) {
    model::internal::FillLayoutTensorInfo(work.node_feat.data(), &gs);
    model::internal::FillLayoutTensorInfo(work.node_feat.data(), &naive);
  }
  const int64_t kept = tf.kept_node_columns();
  std::vector<float> node_feat(n * kept);
  tf.ApplyNodeFeatures(work.node_feat.data(), n, node_feat.data());

  std::vector<int8_t> values;
  std::vector<double> runtimes;
  for (int64_t c : configs) {
    values.insert(values.end(), g.node_config_feat.begin() + c * nc * 18,
                  g.node_config_feat.begin() + (c + 1) * nc * 18);
    runtimes.push_back(g.NormalizedRuntime(c));
  }

  // Float: the CostModel path (what the trainer runs).
  TPUG_ASSIGN_OR_RETURN(auto pg, m.Prepare(g));
  model::ConfigBatch batch;
  batch.num_configs = k;
  batch.layout_feat = values;
  auto tape = m.NewTape();
  std::vector<float> scores(k), dscores(k), grad(m.num_parameters(), 0.0f);
  m.Forward(*pg, batch, scores.data(), tape.get());
  const double loss32 = model::ComputeLoss(loss, scores.data(), runtimes.data(), k, dscores.data());
  m.Backward(*pg, batch, *tape, dscores.data(), grad.data());

  // The same network on the structure rebuilt here: checks that the dump is what Prepare made.
  {
    Gnn<float> gnn(spec, TaskKind::kLayout);
    GnnInputs<float> in;
    in.node_feat = node_feat.data();
    in.k = k;
    in.layout_cfg = values.data();
    std::vector<float> s2(k);
    gnn.Forward(m.parameters(), gs, in, s2.data(), nullptr);
    const double d = MaxRelDiff(ToDouble(s2).data(), ToDouble(scores).data(), k);
    std::fprintf(stderr, "rebuilt graph vs Prepare: max relative score difference %.3g\n", d);
    if (d > 1e-6) {
      return InternalError("the graph rebuilt for the dump does not give Prepare's scores");
    }
  }
  const std::vector<float> params(m.parameters(), m.parameters() + m.num_parameters());
  const DoubleResult shared =
      RunDouble(spec, loss, gs, node_feat, values, k, params, runtimes.data());
  const DoubleResult full =
      RunDouble(spec, loss, naive, node_feat, values, k, params, runtimes.data());
  std::fprintf(
      stderr, "double: shared vs naive computation: scores %.3g, gradient %.3g (max relative)\n",
      MaxRelDiff(shared.scores.data(), full.scores.data(), k),
      MaxRelDiff(shared.grad.data(), full.grad.data(), static_cast<int64_t>(full.grad.size())));

  TPUG_ASSIGN_OR_RETURN(auto w, io::NpzWriter::Create(o.output, true));
  std::string blocks = "[";
  for (const auto& b : m.parameter_blocks()) {
    if (blocks.size() > 1) blocks += ", ";
    blocks += "{\"name\": " + JsonQuote(b.name) + ", \"offset\": " + std::to_string(b.offset) +
              ", \"rows\": " + std::to_string(b.rows) + ", \"cols\": " + std::to_string(b.cols) +
              "}";
  }
  blocks += "]";
  std::string curve_json = "null";
  if (o.curve) TPUG_RETURN_IF_ERROR(WriteCurve(lm, *reader, index, g, w.get(), &curve_json));
  const std::string meta = "{\"graph\": " + JsonQuote(g.name) +
                           ", \"collection\": " + JsonQuote(g.collection) +
                           ", \"model_file\": " + JsonQuote(o.model_path) +
                           ", \"spec\": " + SpecJson(spec) + ", \"loss\": " + LossJson(loss) +
                           ", \"blocks\": " + blocks + ", \"curve\": " + curve_json + "}";
  TPUG_RETURN_IF_ERROR(AddJson(w.get(), "meta_json", meta));
  std::vector<int32_t> opcodes(work.node_opcode.begin(), work.node_opcode.end());
  TPUG_RETURN_IF_ERROR(w->Add<int32_t>("node_opcode", {n}, opcodes.data()));
  TPUG_RETURN_IF_ERROR(w->Add<float>("node_feat_raw", {n, 140}, work.node_feat.data()));
  TPUG_RETURN_IF_ERROR(w->Add<float>("node_feat", {n, kept}, node_feat.data()));
  std::vector<int32_t> kept_cols(tf.kept_node_column_ids().begin(),
                                 tf.kept_node_column_ids().end());
  TPUG_RETURN_IF_ERROR(w->Add<int32_t>("kept_node_columns", {kept}, kept_cols.data()));
  FeatureTransformProto tfp;
  tf.ToProto(&tfp);
  std::vector<double> mean(tfp.node_mean().begin(), tfp.node_mean().end());
  std::vector<double> sd(tfp.node_std().begin(), tfp.node_std().end());
  TPUG_RETURN_IF_ERROR(w->Add<double>("transform_mean", {kept}, mean.data()));
  TPUG_RETURN_IF_ERROR(w->Add<double>("transform_std", {kept}, sd.data()));
  TPUG_RETURN_IF_ERROR(
      w->Add<int64_t>("edge_index", {work.num_edges(), 2}, work.edge_index.data()));
  TPUG_RETURN_IF_ERROR(w->Add<int64_t>("node_config_ids", {nc}, work.node_config_ids.data()));
  TPUG_RETURN_IF_ERROR(w->Add<int64_t>("kept_nodes", {n}, kept_nodes.data()));
  TPUG_RETURN_IF_ERROR(w->Add<int64_t>("full_edge_index", {g.num_edges(), 2}, g.edge_index.data()));
  TPUG_RETURN_IF_ERROR(
      w->Add<int64_t>("full_node_config_ids", {g.num_config_nodes()}, g.node_config_ids.data()));
  const int64_t full_n = g.num_nodes();
  TPUG_RETURN_IF_ERROR(w->Add<int64_t>("full_num_nodes", {1}, &full_n));
  TPUG_RETURN_IF_ERROR(w->Add<int64_t>("configs", {k}, configs.data()));
  TPUG_RETURN_IF_ERROR(w->Add<int8_t>("config_values", {k, nc, 18}, values.data()));
  TPUG_RETURN_IF_ERROR(w->Add<double>("runtimes", {k}, runtimes.data()));
  TPUG_RETURN_IF_ERROR(w->Add<float>("params", {m.num_parameters()}, params.data()));
  TPUG_RETURN_IF_ERROR(w->Add<float>("scores", {k}, scores.data()));
  TPUG_RETURN_IF_ERROR(w->Add<float>("dscores", {k}, dscores.data()));
  TPUG_RETURN_IF_ERROR(w->Add<double>("loss", {1}, &loss32));
  TPUG_RETURN_IF_ERROR(w->Add<float>("grad", {m.num_parameters()}, grad.data()));
  TPUG_RETURN_IF_ERROR(w->Add<double>("scores64", {k}, shared.scores.data()));
  TPUG_RETURN_IF_ERROR(w->Add<double>("dscores64", {k}, shared.dscores.data()));
  TPUG_RETURN_IF_ERROR(w->Add<double>("loss64", {1}, &shared.loss));
  TPUG_RETURN_IF_ERROR(w->Add<double>("grad64", {m.num_parameters()}, shared.grad.data()));
  TPUG_RETURN_IF_ERROR(w->Add<double>("naive_scores64", {k}, full.scores.data()));
  TPUG_RETURN_IF_ERROR(w->Add<double>("naive_grad64", {m.num_parameters()}, full.grad.data()));
  TPUG_RETURN_IF_ERROR(w->Finish());
  std::printf(
      "wrote %s: graph %s, %lld of %lld nodes, %lld edges, %lld configurable nodes, "
      "%lld configs, %lld parameters, loss %.6g\n",
      o.output.c_str(), g.name.c_str(), static_cast<long long>(n), static_cast<long long>(full_n),
      static_cast<long long>(work.num_edges()), static_cast<long long>(nc),
      static_cast<long long>(k), static_cast<long long>(m.num_parameters()), loss32);
  return Status::Ok();
}

}  // namespace
}  // namespace tpugraphs

int main(int argc, char** argv) {
  tpugraphs::Options o;
  CLI::App app{
      "Dumps one batch of a layout model (inputs, parameters, scores, loss, gradients) to .npz "
      "for tools/reference/torch_twin.py (docs/twin.md)."};
  app.add_option("--model", o.model_path, "Model file written by tpugraphs train")->required();
  app.add_option("--dataset", o.dataset_path, "Dataset file (.tpug)")->required();
  app.add_option("--graph", o.graph, "Graph index in the dataset or graph name")
      ->capture_default_str();
  app.add_option("--configs", o.configs, "Comma-separated config indices (default: a sample)");
  app.add_option("--num-configs", o.num_configs, "Configs sampled when --configs is not given")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--seed", o.seed, "Seed of that sample")->capture_default_str();
  app.add_option("--loss", o.loss_text,
                 "LossSpec text proto overriding the model file's loss, e.g. "
                 "\"listmle_weight: 1\"");
  app.add_flag("--curve", o.curve,
               "Also write the trainer's split, per-step batches, learning rates and initial "
               "parameters (single-graph runs with --holdout-config-fraction)");
  app.add_option("-o,--output", o.output, "Output .npz")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  const tpugraphs::Status s = tpugraphs::Run(o);
  if (!s.ok()) {
    std::fprintf(stderr, "tpugraphs_dump_batch: error: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
