#include "tpugraphs/train/model_file.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "tpugraphs/common/file_util.h"
#include "tpugraphs/common/rng.h"
#include "tpugraphs/io/record_format.h"

namespace tpugraphs::train {
namespace {

constexpr char kMagic[8] = {'T', 'P', 'U', 'G', 'R', 'A', 'P', 'H'};

std::string KindName(uint32_t kind) {
  switch (kind) {
    case 1:
      return "dataset";
    case kFileKindModel:
      return "model";
    case kFileKindCheckpoint:
      return "checkpoint";
    default:
      return "kind " + std::to_string(kind);
  }
}

// A tiny graph of the model's task: a random DAG of `n` nodes with raw features of realistic
// magnitudes, and three configurations.
Graph SelfTestGraph(TaskKind task, int num_opcodes, uint64_t seed) {
  Rng rng(seed);
  Graph g;
  g.name = "self_test";
  g.kind = task;
  g.collection = task == TaskKind::kTile ? "tile:selftest" : "layout:selftest:random";
  const int64_t n = 8 + static_cast<int64_t>(rng.UniformInt(8));
  for (int64_t i = 0; i < n; ++i) {
    g.node_opcode.push_back(static_cast<uint8_t>(rng.UniformInt(std::min(num_opcodes, 256))));
    for (int f = 0; f < kNodeFeatureCount; ++f) {
      // Mostly small integers (shapes, counts), some zeros, as in real node features.
      double u = rng.Uniform();
      g.node_feat.push_back(u < 0.4 ? 0.0f : static_cast<float>(std::floor(rng.Uniform() * 64)));
    }
  }
  std::vector<std::pair<int64_t, int64_t>> edges;
  for (int64_t i = 1; i < n; ++i) {
    edges.push_back({i, static_cast<int64_t>(rng.UniformInt(i))});
    if (i > 2 && rng.Uniform() < 0.5) edges.push_back({i, static_cast<int64_t>(rng.UniformInt(i))});
  }
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  for (auto [u, v] : edges) {
    g.edge_index.push_back(u);
    g.edge_index.push_back(v);
  }
  g.num_configs = 3;
  g.config_runtime.assign(3, 0);
  if (task == TaskKind::kTile) {
    g.config_runtime_normalizers.assign(3, 1);
    for (int i = 0; i < 3 * kTileConfigFeatureCount; ++i) {
      g.config_feat.push_back(static_cast<float>(rng.UniformInt(9)));
    }
  } else {
    g.node_config_ids = {1, n / 2, n - 1};
    g.node_splits = {0, n};
    for (int i = 0; i < 3 * 3 * kLayoutConfigFeatureCount; ++i) {
      g.node_config_feat.push_back(static_cast<int8_t>(static_cast<int>(rng.UniformInt(7)) - 1));
    }
  }
  return g;
}

Graph SampleToGraph(const SelfTestSample& s, TaskKind task) {
  Graph g;
  g.name = "self_test";
  g.kind = task;
  g.collection = task == TaskKind::kTile ? "tile:selftest" : "layout:selftest:random";
  g.node_opcode.assign(s.node_opcode().begin(), s.node_opcode().end());
  g.node_feat.assign(s.node_feat().begin(), s.node_feat().end());
  g.edge_index.assign(s.edge_index().begin(), s.edge_index().end());
  g.node_config_ids.assign(s.node_config_ids().begin(), s.node_config_ids().end());
  g.num_configs = s.num_configs();
  g.config_runtime.assign(std::max<int64_t>(0, g.num_configs), 0);
  if (task == TaskKind::kTile) {
    g.config_runtime_normalizers.assign(g.config_runtime.size(), 1);
    g.config_feat.assign(s.tile_feat().begin(), s.tile_feat().end());
  } else {
    const int64_t n = static_cast<int64_t>(g.node_opcode.size());
    g.node_splits = {0, n};
    g.node_config_feat.assign(s.layout_feat().begin(), s.layout_feat().end());
  }
  return g;
}

model::ConfigBatch BatchOfGraph(const Graph& g) {
  model::ConfigBatch b;
  b.num_configs = g.num_configs;
  if (g.is_tile()) {
    b.tile_feat = g.config_feat;
  } else {
    b.layout_feat = g.node_config_feat;
  }
  return b;
}

StatusOr<std::vector<float>> ScoreGraph(const model::CostModel& m, const Graph& g,
                                        const std::string& what) {
  TPUG_RETURN_IF_ERROR(ValidateGraph(g, what));
  TPUG_ASSIGN_OR_RETURN(auto pg, m.Prepare(g));
  model::ConfigBatch batch = BatchOfGraph(g);
  TPUG_RETURN_IF_ERROR(m.ValidateBatch(*pg, batch));
  std::vector<float> scores(g.num_configs);
  m.Forward(*pg, batch, scores.data(), nullptr);
  return scores;
}

}  // namespace

std::string FloatsToBytes(const float* x, int64_t n) {
  std::string out(static_cast<size_t>(n) * 4, '\0');
  for (int64_t i = 0; i < n; ++i) {
    io::PutU32(out.data() + 4 * i, std::bit_cast<uint32_t>(x[i]));
  }
  return out;
}

StatusOr<std::vector<float>> BytesToFloats(const std::string& bytes, int64_t expected_count,
                                           const std::string& what) {
  if (expected_count < 0 || bytes.size() != static_cast<uint64_t>(expected_count) * 4) {
    return DataLossError(what + ": holds " + std::to_string(bytes.size()) + " bytes, expected " +
                         std::to_string(expected_count) + " float32 values");
  }
  std::vector<float> out(expected_count);
  for (int64_t i = 0; i < expected_count; ++i) {
    out[i] = std::bit_cast<float>(io::GetU32(bytes.data() + 4 * i));
  }
  return out;
}

std::string EncodeModelFile(const ModelFile& file, uint32_t kind) {
  std::string payload;
  // Deterministic serialization: same message, same bytes (map fields would otherwise vary).
  {
    google::protobuf::io::StringOutputStream sos(&payload);
    google::protobuf::io::CodedOutputStream cos(&sos);
    cos.SetSerializationDeterministic(true);
    file.SerializeToCodedStream(&cos);
  }
  std::string out(kModelHeaderSize, '\0');
  std::memcpy(out.data(), kMagic, 8);
  io::PutU32(out.data() + 8, file.format_version());
  io::PutU32(out.data() + 12, kind);
  io::PutU64(out.data() + 16, payload.size());
  io::PutU32(out.data() + 24, io::Crc32(payload));
  io::PutU32(out.data() + 28, io::Crc32(std::string_view(out.data(), 28)));
  out += payload;
  return out;
}

Status WriteModelFile(const std::string& path, const ModelFile& file, uint32_t kind) {
  return WriteFileAtomically(path, EncodeModelFile(file, kind));
}

StatusOr<ModelFile> DecodeModelFile(const std::string& bytes, const std::string& path,
                                    uint32_t expected_kind) {
  if (bytes.size() < 8 || std::memcmp(bytes.data(), kMagic, 8) != 0) {
    return InvalidArgumentError(path + ": not a tpugraphs model file (bad magic)");
  }
  if (bytes.size() < kModelHeaderSize) {
    return DataLossError(path + ": truncated model file (" + std::to_string(bytes.size()) +
                         " bytes, the header alone is " + std::to_string(kModelHeaderSize) + ")");
  }
  const char* h = bytes.data();
  if (io::Crc32(std::string_view(h, 28)) != io::GetU32(h + 28)) {
    return DataLossError(path + ": model file header is corrupted (CRC mismatch)");
  }
  const uint32_t version = io::GetU32(h + 8);
  const uint32_t kind = io::GetU32(h + 12);
  if (version > kModelFormatVersion) {
    return UnimplementedError(path + ": model file format v" + std::to_string(version) +
                              " is newer than supported v" + std::to_string(kModelFormatVersion) +
                              "; use a newer tpugraphs");
  }
  if (version == 0) return DataLossError(path + ": invalid model file format version 0");
  if (kind != kFileKindModel && kind != kFileKindCheckpoint) {
    return InvalidArgumentError(path + ": tpugraphs file is a " + KindName(kind) +
                                ", not a model or checkpoint");
  }
  if (expected_kind != 0 && kind != expected_kind) {
    return InvalidArgumentError(path + ": tpugraphs file is a " + KindName(kind) + ", expected a " +
                                KindName(expected_kind));
  }
  const uint64_t size = io::GetU64(h + 16);
  const uint64_t have = bytes.size() - kModelHeaderSize;
  if (have < size) {
    return DataLossError(path + ": truncated model file (payload " + std::to_string(have) + " of " +
                         std::to_string(size) + " bytes)");
  }
  if (have > size) {
    return DataLossError(path + ": " + std::to_string(have - size) +
                         " unexpected bytes after the model payload");
  }
  std::string_view payload(bytes.data() + kModelHeaderSize, size);
  if (io::Crc32(payload) != io::GetU32(h + 24)) {
    return DataLossError(path + ": model file is corrupted (payload CRC mismatch)");
  }
  ModelFile file;
  if (!file.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return DataLossError(path + ": model payload does not parse as tpugraphs.ModelFile");
  }
  if (file.format_version() != version) {
    return DataLossError(path + ": payload format version " +
                         std::to_string(file.format_version()) + " differs from the header's " +
                         std::to_string(version));
  }
  if (file.ensemble_size() > 0 && version < 2) {
    return DataLossError(path + ": holds an ensemble but is marked format version " +
                         std::to_string(version) + " (ensembles are version 2)");
  }
  for (const ModelFile& member : file.ensemble()) {
    if (member.ensemble_size() > 0 || member.has_checkpoint()) {
      return DataLossError(path + ": an ensemble member holds an ensemble or a checkpoint");
    }
  }
  return file;
}

StatusOr<ModelFile> ReadModelFile(const std::string& path, uint32_t expected_kind) {
  TPUG_ASSIGN_OR_RETURN(uint64_t size, FileSize(path));
  // Parameters of the largest sensible model are far below this; protobuf's limit is 2 GiB.
  if (size > (uint64_t{1} << 31)) {
    return ResourceExhaustedError(path + ": " + std::to_string(size) +
                                  " bytes is too large for a model file");
  }
  TPUG_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  return DecodeModelFile(bytes, path, expected_kind);
}

void StoreModel(const model::CostModel& m, ModelFile* file) {
  file->set_format_version(kModelFormatVersionSingle);
  file->set_task(std::string(TaskKindName(m.task())));
  *file->mutable_model_spec() = m.spec();
  m.transform().ToProto(file->mutable_feature_transform());
  file->set_num_parameters(m.num_parameters());
  file->set_parameters(FloatsToBytes(m.parameters(), m.num_parameters()));
}

Status AddSelfTests(const model::CostModel& m, int count, uint64_t seed, ModelFile* file) {
  for (int i = 0; i < count; ++i) {
    Graph g = SelfTestGraph(m.task(), m.spec().num_opcodes(), DeriveSeed(seed, "self_test", i));
    g.absent_dimensions_marked = m.transform().absent_dimensions_marked();
    TPUG_ASSIGN_OR_RETURN(std::vector<float> scores, ScoreGraph(m, g, "self-test graph"));
    SelfTestSample* s = file->add_self_test();
    s->set_num_nodes(g.num_nodes());
    s->set_node_opcode(std::string(g.node_opcode.begin(), g.node_opcode.end()));
    for (float v : g.node_feat) s->add_node_feat(v);
    for (int64_t v : g.edge_index) s->add_edge_index(v);
    for (int64_t v : g.node_config_ids) s->add_node_config_ids(v);
    s->set_num_configs(g.num_configs);
    for (float v : g.config_feat) s->add_tile_feat(v);
    s->set_layout_feat(std::string(g.node_config_feat.begin(), g.node_config_feat.end()));
    for (float v : scores) s->add_expected_scores(v);
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<model::CostModel>> RestoreModel(const ModelFile& file,
                                                         const std::string& path) {
  TaskKind task;
  if (file.task() == "tile") {
    task = TaskKind::kTile;
  } else if (file.task() == "layout") {
    task = TaskKind::kLayout;
  } else {
    return DataLossError(path + ": unknown task \"" + file.task() + "\" in model file");
  }
  auto created = model::CostModel::Create(file.model_spec(), task);
  if (!created.ok()) return created.status().WithContext(path + ": model spec");
  std::unique_ptr<model::CostModel> m = std::move(created).value();
  Status st = m->transform().FromProto(file.feature_transform());
  if (!st.ok()) return st.WithContext(path + ": feature transform");
  if (file.num_parameters() != m->num_parameters()) {
    return DataLossError(path + ": holds " + std::to_string(file.num_parameters()) +
                         " parameters but its model spec needs " +
                         std::to_string(m->num_parameters()));
  }
  TPUG_ASSIGN_OR_RETURN(
      std::vector<float> params,
      BytesToFloats(file.parameters(), m->num_parameters(), path + ": parameters"));
  for (size_t i = 0; i < params.size(); ++i) {
    if (!std::isfinite(params[i])) {
      return DataLossError(path + ": parameter " + std::to_string(i) + " is not finite");
    }
  }
  std::copy(params.begin(), params.end(), m->parameters());
  for (int i = 0; i < file.self_test_size(); ++i) {
    const SelfTestSample& s = file.self_test(i);
    const std::string what = path + ": self-test sample " + std::to_string(i);
    Graph g = SampleToGraph(s, task);
    g.absent_dimensions_marked = m->transform().absent_dimensions_marked();
    auto scores = ScoreGraph(*m, g, what);
    if (!scores.ok()) return scores.status();
    if (static_cast<int64_t>(scores->size()) != s.expected_scores_size()) {
      return DataLossError(what + ": has " + std::to_string(s.expected_scores_size()) +
                           " expected scores for " + std::to_string(scores->size()) + " configs");
    }
    for (size_t c = 0; c < scores->size(); ++c) {
      const double want = s.expected_scores(static_cast<int>(c));
      const double got = (*scores)[c];
      if (!(std::fabs(got - want) <= 1e-4 * std::max(1.0, std::fabs(want)))) {
        return DataLossError(what + ": config " + std::to_string(c) + " scores " +
                             std::to_string(got) + " but the model file expects " +
                             std::to_string(want) +
                             " (the file was altered, or this build computes the model "
                             "differently from the one that saved it)");
      }
    }
  }
  return m;
}

StatusOr<LoadedModel> LoadModel(const std::string& path) {
  LoadedModel out;
  TPUG_ASSIGN_OR_RETURN(out.file, ReadModelFile(path));
  TPUG_ASSIGN_OR_RETURN(out.model, RestoreModel(out.file, path));
  return out;
}

}  // namespace tpugraphs::train
