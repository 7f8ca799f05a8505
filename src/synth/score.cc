// synth::ScoreConfigFile: the noise-free runtime of every configuration of an .npz.
#include <cmath>
#include <string>
#include <vector>

#include "tpugraphs/ingest/config_npz.h"
#include "tpugraphs/synth/ground_truth.h"
#include "tpugraphs/synth/synth.h"

namespace tpugraphs::synth {

StatusOr<ConfigScores> ScoreConfigFile(const std::string& npz, const std::string& program) {
  TPUG_ASSIGN_OR_RETURN(auto truth, GroundTruth::Open(program));
  ConfigScores scores;
  scores.task = truth->task();
  const bool layout = scores.task == TaskKind::kLayout;
  // Layout: node_config_ids, when present, must be the program's configurable nodes.
  TPUG_ASSIGN_OR_RETURN(
      ingest::NpzConfigs configs,
      ingest::ReadNpzConfigs(npz, scores.task,
                             layout ? truth->configurable() : std::vector<int64_t>{}, program));
  const int64_t row =
      layout ? static_cast<int64_t>(truth->configurable().size()) * kLayoutConfigFeatureCount
             : kTileConfigFeatureCount;
  for (int64_t k = 0; k < configs.count; ++k) {
    const std::string what = npz + ": configuration " + std::to_string(k);
    TPUG_ASSIGN_OR_RETURN(double v, layout ? truth->LayoutCostNs(&configs.layout[k * row], what)
                                           : truth->TileCostNs(&configs.tile[k * row], what));
    scores.noise_free_ns.push_back(static_cast<int64_t>(std::llround(v)));
  }
  return scores;
}

}  // namespace tpugraphs::synth
