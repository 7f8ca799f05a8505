#include "tpugraphs/ingest/config_npz.h"

#include "tpugraphs/io/npz.h"

namespace tpugraphs::ingest {

StatusOr<NpzConfigs> ReadNpzConfigs(const std::string& npz, TaskKind task,
                                    const std::vector<int64_t>& config_ids,
                                    const std::string& what) {
  TPUG_ASSIGN_OR_RETURN(auto reader, io::NpzReader::Open(npz));
  NpzConfigs out;
  if (task == TaskKind::kLayout) {
    if (!reader->Has("node_config_feat")) {
      return InvalidArgumentError(npz + ": no node_config_feat array, but " + what +
                                  " is a layout program");
    }
    TPUG_ASSIGN_OR_RETURN(auto feat, reader->Read<int8_t>("node_config_feat"));
    const int64_t nc = static_cast<int64_t>(config_ids.size());
    if (feat.shape.size() != 3 || feat.shape[1] != nc ||
        feat.shape[2] != kLayoutConfigFeatureCount) {
      return InvalidArgumentError(npz + ": node_config_feat must be [K, " + std::to_string(nc) +
                                  ", 18] for " + what + " (" + std::to_string(nc) +
                                  " configurable nodes)");
    }
    if (reader->Has("node_config_ids")) {
      TPUG_ASSIGN_OR_RETURN(auto ids, reader->Read<int64_t>("node_config_ids"));
      if (ids.data != config_ids) {
        return InvalidArgumentError(npz +
                                    ": node_config_ids differ from the configurable nodes "
                                    "of " +
                                    what + "; were the configurations made for it?");
      }
    }
    out.count = feat.shape[0];
    out.layout = std::move(feat.data);
  } else {
    if (!reader->Has("config_feat")) {
      return InvalidArgumentError(npz + ": no config_feat array, but " + what +
                                  " is a tile kernel");
    }
    TPUG_ASSIGN_OR_RETURN(auto feat, reader->Read<float>("config_feat"));
    if (feat.shape.size() != 2 || feat.shape[1] != kTileConfigFeatureCount) {
      return InvalidArgumentError(npz + ": config_feat must be [K, 24]");
    }
    out.count = feat.shape[0];
    out.tile = std::move(feat.data);
  }
  return out;
}

}  // namespace tpugraphs::ingest
