// synth::ScoreConfigFile: the noise-free runtime of every configuration of an .npz.
#include <cmath>
#include <string>
#include <vector>

#include "tpugraphs/io/npz.h"
#include "tpugraphs/synth/ground_truth.h"
#include "tpugraphs/synth/synth.h"

namespace tpugraphs::synth {
namespace {

// Layout: node_config_feat [K, nc, 18] (node_config_ids, when present, must be the program's
// configurable nodes).
Status ScoreLayoutConfigs(const GroundTruth& truth, io::NpzReader& reader, const std::string& npz,
                          const std::string& program, std::vector<int64_t>* ns) {
  if (!reader.Has("node_config_feat")) {
    return InvalidArgumentError(npz + ": no node_config_feat array, but " + program +
                                " is a layout program");
  }
  TPUG_ASSIGN_OR_RETURN(auto feat, reader.Read<int8_t>("node_config_feat"));
  const int64_t nc = static_cast<int64_t>(truth.configurable().size());
  if (feat.shape.size() != 3 || feat.shape[1] != nc || feat.shape[2] != kLayoutConfigFeatureCount) {
    return InvalidArgumentError(npz + ": node_config_feat must be [K, " + std::to_string(nc) +
                                ", 18] for " + program + " (" + std::to_string(nc) +
                                " configurable nodes)");
  }
  if (reader.Has("node_config_ids")) {
    TPUG_ASSIGN_OR_RETURN(auto ids, reader.Read<int64_t>("node_config_ids"));
    if (ids.data != truth.configurable()) {
      return InvalidArgumentError(npz +
                                  ": node_config_ids differ from the configurable nodes "
                                  "of " +
                                  program + "; were the configurations made for it?");
    }
  }
  for (int64_t k = 0; k < feat.shape[0]; ++k) {
    TPUG_ASSIGN_OR_RETURN(
        double v,
        truth.LayoutCostNs(&feat.data[k * nc * 18], npz + ": configuration " + std::to_string(k)));
    ns->push_back(static_cast<int64_t>(std::llround(v)));
  }
  return Status::Ok();
}

// Tile: config_feat [K, 24].
Status ScoreTileConfigs(const GroundTruth& truth, io::NpzReader& reader, const std::string& npz,
                        const std::string& program, std::vector<int64_t>* ns) {
  if (!reader.Has("config_feat")) {
    return InvalidArgumentError(npz + ": no config_feat array, but " + program +
                                " is a tile kernel");
  }
  TPUG_ASSIGN_OR_RETURN(auto feat, reader.Read<float>("config_feat"));
  if (feat.shape.size() != 2 || feat.shape[1] != kTileConfigFeatureCount) {
    return InvalidArgumentError(npz + ": config_feat must be [K, 24]");
  }
  for (int64_t k = 0; k < feat.shape[0]; ++k) {
    TPUG_ASSIGN_OR_RETURN(double v, truth.TileCostNs(&feat.data[k * 24],
                                                     npz + ": configuration " + std::to_string(k)));
    ns->push_back(static_cast<int64_t>(std::llround(v)));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<ConfigScores> ScoreConfigFile(const std::string& npz, const std::string& program) {
  TPUG_ASSIGN_OR_RETURN(auto truth, GroundTruth::Open(program));
  TPUG_ASSIGN_OR_RETURN(auto reader, io::NpzReader::Open(npz));
  ConfigScores scores;
  scores.task = truth->task();
  if (scores.task == TaskKind::kLayout) {
    TPUG_RETURN_IF_ERROR(ScoreLayoutConfigs(*truth, *reader, npz, program, &scores.noise_free_ns));
  } else {
    TPUG_RETURN_IF_ERROR(ScoreTileConfigs(*truth, *reader, npz, program, &scores.noise_free_ns));
  }
  return scores;
}

}  // namespace tpugraphs::synth
