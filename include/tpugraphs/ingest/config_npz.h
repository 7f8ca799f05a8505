// Configurations stored in an .npz in the release encoding, as `tune` and `export` write them:
// node_config_feat [K, nc, 18] int8 (layout; node_config_ids [nc], when present, names the
// configurable nodes) or config_feat [K, 24] float32 (tile). Read by `synth --score` and
// `tune --apply`.
//
// Thread-safety: reentrant.
#ifndef TPUGRAPHS_INGEST_CONFIG_NPZ_H_
#define TPUGRAPHS_INGEST_CONFIG_NPZ_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tpugraphs/common/graph.h"
#include "tpugraphs/common/status.h"

namespace tpugraphs::ingest {

struct NpzConfigs {
  int64_t count = 0;           // K
  std::vector<int8_t> layout;  // [K, nc, 18] (layout)
  std::vector<float> tile;     // [K, 24] (tile)
};

// The configurations of `npz` for `what` (a graph or program named in errors), a `task` graph
// whose configurable nodes are `config_ids` (layout). Errors name the file: a missing array, a
// shape other than [K, nc, 18] or [K, 24], node_config_ids other than config_ids.
StatusOr<NpzConfigs> ReadNpzConfigs(const std::string& npz, TaskKind task,
                                    const std::vector<int64_t>& config_ids,
                                    const std::string& what);

}  // namespace tpugraphs::ingest

#endif  // TPUGRAPHS_INGEST_CONFIG_NPZ_H_
