// `tpugraphs train`: flags (or a --config text proto) -> TrainConfig -> train::Train.
//
// Flags are generated from the TrainConfig, ModelSpec and LossSpec fields by protobuf reflection:
// the flag is the field name with dashes (learning_rate -> --learning-rate, model.hidden_dim ->
// --hidden-dim), its default is the proto default, enum values are the lower-case suffixes of the
// enum value names (OPTIMIZER_ADAMW -> adamw). Only the help texts are written here; a test checks
// that every field has one. Flags given on the command line override the --config file.
#include <google/protobuf/text_format.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "command.h"
#include "proto_flags.h"
#include "tpugraphs/common/hash.h"
#include "tpugraphs/common/proto_fields.h"
#include "tpugraphs/distributed/communicator.h"
#include "tpugraphs/train/model_scorer.h"
#include "tpugraphs/train/train_config.h"
#include "tpugraphs/train/trainer.h"

namespace tpugraphs::cli {
namespace {

// The model scorer behind `evaluate --model` / `predict --model` lives in the train stage; this
// reference makes sure it is linked into the binary and registered.
[[maybe_unused]] const bool kModelScorerRegistered = train::RegisterModelFileScorer();

// One line per option ("field" of TrainConfig, or "model.field" / "loss.field"); choices and
// defaults are appended from the proto.
const ProtoFlagHelp kFlags[] = {
    {"dataset", "Dataset file with the training graphs (required unless --resume)"},
    {"valid_dataset", "Dataset with the validation graphs (empty: the training dataset)"},
    {"collection",
     "Collection to train on, e.g. tile:xla or layout:nlp:default (empty: the only "
     "one present)"},
    {"train_split",
     "Split of the training graphs, or a comma-separated list (train,valid: train on the "
     "validation programs too; empty: all graphs of the collection)"},
    {"valid_split", "Split of the validation graphs (empty: no validation)"},
    {"holdout_config_fraction",
     "Hold out this share of each training graph's distinct configs and validate on them "
     "instead of a validation split (0 = off)"},
    {"output", "Model file to write: the best epoch's parameters (required)"},
    {"checkpoint", "Checkpoint written after every epoch (empty: <output>.ckpt)"},
    {"resume",
     "Continue the run saved in this checkpoint (--epochs, --patience, -j and the "
     "outputs may change)"},
    {"auto_resume",
     "After a kill, run the same command again with this: it continues from the run's own "
     "checkpoint (an ensemble's: from its unfinished member's) when that exists and was written "
     "by the same command, else starts afresh (true/false)"},
    {"epochs", "Epochs: passes over the training graphs, or steps_per_epoch steps each"},
    {"batch_graphs", "Graphs per optimizer step"},
    {"steps_per_epoch",
     "Optimizer steps between two validations (0 = one pass over the training graphs); "
     "epochs x steps_per_epoch is then the step budget"},
    {"min_config_passes",
     "Raise steps per epoch until the run samples at least this many passes over the training "
     "configurations (0 = off): one budget for a collection and for a single large graph"},
    {"dedup_configs",
     "Train on one config per distinct set of config values, the fastest measurement "
     "(true/false)"},
    {"configs_per_graph", "Configurations sampled per graph per step (uniform, no replacement)"},
    {"patience", "Early stopping: epochs without improvement of the validation metric (0 = off)"},
    {"carve_valid_fraction",
     "Without validation graphs: validate on this share of each training graph's distinct "
     "training configs, carved out of its pool (best epoch, early stopping); held-out configs "
     "are then scored once, by the model written (0 = off)"},
    {"carve_patience",
     "With a carved validation: early stopping after this many epochs without improvement, in "
     "place of --patience (0 = --patience applies)"},
    {"optimizer", "adamw (decoupled weight decay) or adam (weight decay as L2 on the gradient)"},
    {"learning_rate", "Peak learning rate"},
    {"beta1", "Adam first-moment decay"},
    {"beta2", "Adam second-moment decay"},
    {"adam_epsilon", "Adam epsilon"},
    {"weight_decay", "Weight decay"},
    {"clip_norm", "Clip each step's gradient to this global L2 norm (0 = off)"},
    {"lr_schedule", "cosine (warmup then cosine decay) or constant (warmup then constant)"},
    {"warmup_steps", "Linear warmup length in optimizer steps"},
    {"min_lr_ratio", "Cosine floor as a share of the learning rate"},
    {"ema_decay",
     "Average the parameters over the steps (exponential moving average with this decay) and "
     "validate and write the average (0 = off)"},
    {"valid_max_configs",
     "Score at most this many configs per validation graph (fixed sample; "
     "0 = all)"},
    {"valid_every_epochs",
     "Validate after every this many epochs and after the last (1 = every epoch); patience "
     "still counts epochs, and a run stops only at a validation"},
    {"tile_top_k", "K of the tile validation metric (top-K error)"},
    {"tile_valid_metric",
     "Tile validation metric (best epoch, early stopping): top_k_error (K = --tile-top-k) or "
     "kendall"},
    {"eval_batch_configs", "Configurations per forward call in validation"},
    {"seed", "Master seed of every random decision (-1: from the clock, recorded in the model)"},
    {"ensemble_members",
     "Train this many models with different seed streams on the same data, one after another, "
     "into one model file whose scores combine them per graph (mean of standardised scores); "
     "finished members are kept as OUTPUT.member-M and reused when the command is run again"},
    {"ensemble_member",
     "With --ensemble-members N: train only member M (1..N-1) alone into --output; such files "
     "combine with `evaluate --model`"},
    {"ensemble_member_alone",
     "With --ensemble-members N and --ensemble-member M (0..N-1): train only that member into "
     "OUTPUT.member-M as the ensemble's run would; the ensemble's command run afterwards reuses "
     "the members and writes the ensemble file (members side by side; needs --seed)"},
    {"members_side_by_side",
     "With --ensemble-members: train this many members at once, each on -j / N threads (1 = one "
     "after another on all threads; 0 = automatic: side by side on one training graph, whose "
     "step is too small for all threads, else one after another); the file is the same for any "
     "N"},
    {"self_test_samples", "Self-test graphs stored in the model file and checked on load"},
    {"min_configs", "Skip training graphs with fewer configurations"},
    {"checkpoint_interval_seconds",
     "Write the checkpoint when this many seconds have passed since the last, checked after "
     "every step (inside epochs too), and after the last epoch (0 = after every epoch only)"},
    {"stop_after_steps",
     "Stop after this many optimizer steps of this invocation with a checkpoint and no model "
     "(stdout: stopped<TAB>CHECKPOINT), for job time limits; the same command with "
     "--auto-resume true continues (0 = no limit)"},
    {"init_from",
     "Fine-tune: start from this model file's parameters (a single model written by train), "
     "keeping its architecture and feature transform; the model options are the file's"},
    {"gst",
     "Graph Segment Training (layout, needs --segment-size): off, on (history table) or fresh "
     "(other segments recomputed without a tape)"},
    {"gst_segments_per_step", "GST: segments back-propagated per graph and step"},
    {"gst_keep_probability", "GST: stale embedding dropout keep probability (rows weighted 1/p)"},
    {"gst_finetune_epochs", "GST: the last N epochs train only the head on fresh embeddings"},
    {"model.segment_size",
     "Model: cut graphs into segments of at most this many nodes (node_splits-aware; edges "
     "between segments dropped; 0 = whole graph)"},
    {"model.prune_hops",
     "Model (layout): keep only nodes within this many hops of a configurable node (-1 = off)"},
    {"model.hidden_dim", "Model: width of node states"},
    {"model.num_layers", "Model: message-passing layers"},
    {"model.opcode_embedding_dim", "Model: opcode embedding width"},
    {"model.num_opcodes", "Model: opcode embedding rows (ids beyond use row 0)"},
    {"model.layout_value_embedding_dim", "Model: embedding width of one layout config value"},
    {"model.layout_value_max", "Model: largest layout value with its own embedding row"},
    {"model.tile_join", "Model: where tile config features join: late (after pooling) or early"},
    {"model.aggregation", "Model: neighbour aggregation: mean or sum"},
    {"model.activation", "Model: leaky_relu or gelu"},
    {"model.leaky_relu_slope", "Model: negative slope of the leaky ReLU"},
    {"model.residual", "Model: residual connections around layers (true/false)"},
    {"model.layer_norm", "Model: LayerNorm after every layer (true/false)"},
    {"model.layer_norm_epsilon", "Model: LayerNorm epsilon"},
    {"model.pool_mean", "Model: mean pooling over nodes (true/false)"},
    {"model.pool_max", "Model: max pooling over nodes (true/false)"},
    {"model.config_pooling", "Model (layout): pooling over configurable nodes: mean, sum, none"},
    {"model.head_hidden_dim", "Model: width of the head's hidden layers"},
    {"model.head_layers", "Model: hidden layers of the head MLP"},
    {"model.init_scale", "Model: scale of the Glorot-uniform initial weights"},
    {"model.layout_tensor_features",
     "Model (layout): derived tensor features (dim sizes, (8,128) padding waste) (true/false)"},
    {"model.config_node_head",
     "Model (layout): width of the per-configurable-node score term added to the graph score "
     "(0 = off)"},
    {"model.config_node_head_pooling",
     "Model (layout): how the per-node score terms combine: sum, or logsumexp (each term the log "
     "of a node's cost)"},
    {"model.config_loop_depth",
     "Model (layout): give each configurable node the number of while loops around it "
     "(true/false)"},
    {"model.tile_derived_features",
     "Model (tile): add the log tile count, padding waste and padded tile size of the output and "
     "of the weights to the config features (true/false)"},
    {"model.layout_flow_features",
     "Model (layout): per configuration, copies at each configurable node's input, kernel and "
     "output implied by the layouts chosen upstream, and the size of the instructions that follow "
     "its output layout (true/false)"},
    {"model.layout_size_features",
     "Model (layout): the size of each configurable node's output, input and kernel and their "
     "padding to the (8, 128) tile under the layout in effect (true/false)"},
    {"model.layout_rank_aware",
     "Model (layout): in the derived tensor and size features, minor_to_major slots beyond a "
     "tensor's rank mean no dimension (the official features pad them with 0, dimension 0's "
     "index) (true/false)"},
    {"model.config_node_head_linear",
     "Model (layout): add a linear term of the node's inputs (log sizes and paddings) to each "
     "per-node score, learned from zero beside the term's MLP (true/false; needs "
     "--config-node-head)"},
    {"model.config_attention",
     "Model (layout): width of cross-configuration attention in the per-node score term: the "
     "configurations scored together attend to one another at each configurable node (0 = off; "
     "needs --config-node-head)"},
    {"model.config_attention_batch",
     "Model (layout): configurations per attention batch at inference"},
    {"model.layout_dim_split_features",
     "Model (layout): the minor and second-minor dimensions of each configurable node's tensors "
     "split by the (8, 128) register tile: size mod 128 and div 128, mod 8 and div 8 "
     "(true/false)"},
    {"model.layout_dimension_tokens",
     "Model (layout): encode every dimension of each configurable node's tensors (its size, its "
     "place in the graph's layout and in the configuration's) with a shared one-layer encoder of "
     "width E and sum over the dimensions, a block of E columns per tensor; the sum does not "
     "depend on how the dimensions are numbered (0 = off)"},
    {"model.config_random_walk",
     "Model (layout): give each configurable node its random-walk return probabilities after 2 "
     "to K+1 steps on the (pruned) graph, edges taken both ways (0 = off)"},
    {"model.virtual_node",
     "Model (layout): add a virtual node that reads the (pruned) graph's outputs or its "
     "configurable nodes, so message passing carries a whole-graph summary back to them: none, "
     "outputs or configurable (needs --num-layers >= 2 to reach back)"},
    {"model.fold_chains",
     "Model (layout): before pruning, remove the chain links (nodes not configurable that read "
     "one operand and are read once), their readers reading the next node up the chain "
     "(true/false)"},
    {"model.merge_repeated",
     "Model (layout): before pruning (after folding), merge each node that is not configurable "
     "into an earlier one with the same opcode, features and operands, until none is left, so "
     "repeated sub-graphs fold into one (true/false)"},
    {"model.config_attention_permutations",
     "Model (layout): random orders of the configurations averaged at inference (attention)"},
    {"loss.pairwise_hinge_weight", "Loss: weight of the pairwise hinge term"},
    {"loss.hinge_margin", "Loss: hinge margin"},
    {"loss.hinge_pair_weighting",
     "Loss: hinge pair weights: uniform; log_gap (|log r_i - log r_j| over its mean, so pairs "
     "apart by measurement noise count little); or noise (erf(|log r_i - log r_j| / (2 "
     "--hinge-noise)) over its mean: how surely the measured order is the true one)"},
    {"loss.hinge_noise",
     "Loss: relative standard deviation of one runtime measurement, for --hinge-pair-weighting "
     "noise (`tpugraphs stats` estimates it from repeated configurations)"},
    {"loss.listmle_weight", "Loss: weight of the ListMLE term"},
    {"loss.listmle_temperature", "Loss: ListMLE temperature"},
    {"loss.mse_weight", "Loss: weight of the MSE term"},
    {"loss.mse_target", "Loss: MSE target: centered_log or scaled"},
    {"loss.mse_scale", "Loss: runtime scale of the 'scaled' MSE target"},
};

// TrainConfig.threads has no flag of its own: it is the global -j/--threads.

struct TrainFlags {
  std::string config_file;
  bool print_config = false;
  std::unique_ptr<ProtoFlags> fields;
};

RunFn SetupTrain(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "train",
      "Train a cost model on a dataset and write a model file (docs/train.md).\n"
      "Prints the best epoch and its validation metric on stdout, progress and one line per\n"
      "epoch on stderr. Flags override a --config text proto (TrainConfig).");
  auto flags = std::make_shared<TrainFlags>();
  sub->add_option("--config", flags->config_file,
                  "TrainConfig text proto with any of the options below (flags override it)");
  sub->add_flag("--print-config", flags->print_config,
                "Print the TrainConfig that --config and the flags resolve to (a text proto; "
                "options at their default left out, so equal settings print the same; the first "
                "line, a comment, holds a digest of them) and exit without training");
  flags->fields = std::make_unique<ProtoFlags>(sub, TrainConfig::descriptor(), kFlags);

  return [flags]() -> Status {
    TrainConfig config;
    if (!flags->config_file.empty()) {
      TPUG_ASSIGN_OR_RETURN(config, train::ReadTrainConfigFile(flags->config_file));
    }
    TPUG_RETURN_IF_ERROR(flags->fields->Apply(&config));
    if (flags->print_config) {
      // The settings, not the machine: -j is left out.
      ClearDefaultFields(&config);
      std::string text;
      google::protobuf::TextFormat::PrintToString(config, &text);
      // An identity of the settings that does not depend on how a protobuf version prints
      // numbers: FNV-1a of the wire format (fields in number order, no maps, so canonical).
      std::printf("# settings digest: %016llx\n",
                  static_cast<unsigned long long>(Fnv1a(config.SerializeAsString())));
      std::fputs(text.c_str(), stdout);
      std::fflush(stdout);
      return Status::Ok();
    }
    if (Globals().threads > 0) config.set_threads(Globals().threads);
    TPUG_ASSIGN_OR_RETURN(train::TrainResult result, train::Train(config));
    if (distributed::World().rank() != 0) return Status::Ok();  // rank 0 reports for the job
    if (result.stopped) {
      std::printf("stopped\t%s\n", result.checkpoint.c_str());
      std::printf("steps\t%lld\n", static_cast<long long>(result.steps_run));
      std::fflush(stdout);
      return Status::Ok();
    }
    // The result for scripts.
    std::printf("model\t%s\n", result.output.c_str());
    std::printf("epochs\t%d\n", result.epochs_run);
    std::printf("best_epoch\t%d\n", result.best_epoch);
    std::printf("%s\t%.6g\n", result.metric_name.c_str(), result.best_metric);
    if (!result.member_metrics.empty()) {
      // An ensemble: the line above is the ensemble's; each member's on the same configurations.
      std::printf("ensemble_members\t%zu\n", result.member_metrics.size());
      for (size_t m = 0; m < result.member_metrics.size(); ++m) {
        std::printf("member_%zu_%s\t%.6g\n", m, result.metric_name.c_str(),
                    result.member_metrics[m]);
      }
    }
    if (!std::isnan(result.held_out_metric)) {
      // A carved validation picked the epochs: the written model on the held-out configurations.
      std::string name = result.metric_name;
      if (name.rfind("valid_", 0) == 0) name = name.substr(6);
      std::printf("held_out_%s\t%.6g\n", name.c_str(), result.held_out_metric);
    }
    if (!result.reference_name.empty()) {
      std::printf("reference_%s_%s\t%.6g\n", result.reference_name.c_str(),
                  result.metric_name.c_str(), result.reference_metric);
    }
    std::fflush(stdout);
    return Status::Ok();
  };
}

TPUGRAPHS_REGISTER_COMMAND(50, "train", SetupTrain);

}  // namespace
}  // namespace tpugraphs::cli
