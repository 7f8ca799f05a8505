// The model file: everything needed to score configurations with a trained CostModel, and the
// checkpoint file that `train --resume` continues from (docs/model-file.md).
//
// On disk: a 32-byte header followed by one serialized ModelFile message
// (proto/tpugraphs/model_file.proto):
//   bytes 0..7   magic "TPUGRAPH" (shared by every tpugraphs binary file)
//   bytes 8..11  u32 format version (1, or 2 for an ensemble; kModelFormatVersion)
//   bytes 12..15 u32 file kind: 2 = model, 3 = checkpoint (1 is a dataset)
//   bytes 16..23 u64 payload size
//   bytes 24..27 u32 CRC-32 (zlib polynomial) of the payload
//   bytes 28..31 u32 CRC-32 of bytes 0..27
// all little-endian. Readers reject a wrong magic, a newer version, another kind, a size that
// does not match the file (truncation) and a CRC mismatch (corruption), each with a message
// naming the file. Files are written atomically (temporary + rename).
//
// The payload describes itself: the exact TrainConfig of the run (seed resolved), the ModelSpec,
// the task, the fitted feature transform, the flat parameters, a fingerprint of the training
// data, and self-test samples (tiny synthetic graphs with the scores the model gave them when it
// was saved). LoadModel re-scores the samples and refuses a file whose forward pass no longer
// reproduces them.
//
// Thread-safety: free functions; reentrant. A loaded CostModel follows CostModel's rules.
#ifndef TPUGRAPHS_TRAIN_MODEL_FILE_H_
#define TPUGRAPHS_TRAIN_MODEL_FILE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tpugraphs/common/status.h"
#include "tpugraphs/model/cost_model.h"
#include "tpugraphs/model_file.pb.h"

namespace tpugraphs::train {

// Structural version of the model file; bumped only when the header or the meaning of existing
// fields changes, never for new proto fields. Version 2 files may hold an ensemble
// (ModelFile.ensemble), which a version-1 reader would score as its first member alone; a file
// without one is written as version 1, which every reader reads.
inline constexpr uint32_t kModelFormatVersion = 2;  // the newest this build reads and writes
inline constexpr uint32_t kModelFormatVersionSingle = 1;
inline constexpr uint32_t kFileKindModel = 2;
inline constexpr uint32_t kFileKindCheckpoint = 3;
inline constexpr size_t kModelHeaderSize = 32;

// Serializes `file` behind the header and writes it atomically to `path`.
Status WriteModelFile(const std::string& path, const ModelFile& file, uint32_t kind);
// Encodes header + payload in memory (what WriteModelFile writes).
std::string EncodeModelFile(const ModelFile& file, uint32_t kind);

// Reads and checks a model or checkpoint file. `expected_kind` 0 accepts either.
StatusOr<ModelFile> ReadModelFile(const std::string& path, uint32_t expected_kind = 0);
// Same, from bytes; `path` names the source in messages.
StatusOr<ModelFile> DecodeModelFile(const std::string& bytes, const std::string& path,
                                    uint32_t expected_kind = 0);

// Float buffers as little-endian bytes and back.
std::string FloatsToBytes(const float* x, int64_t n);
StatusOr<std::vector<float>> BytesToFloats(const std::string& bytes, int64_t expected_count,
                                           const std::string& what);

// Stores the model's task, spec, feature transform and parameters into `file`.
void StoreModel(const model::CostModel& m, ModelFile* file);

// Adds `count` self-test samples (tiny synthetic graphs derived from `seed`) scored by `m`.
// REQUIRES: m.transform().finalized().
Status AddSelfTests(const model::CostModel& m, int count, uint64_t seed, ModelFile* file);

// Rebuilds the CostModel stored in `file` (spec, task, transform, parameters) and re-runs its
// self tests. `path` names the file in messages.
StatusOr<std::unique_ptr<model::CostModel>> RestoreModel(const ModelFile& file,
                                                         const std::string& path);

struct LoadedModel {
  ModelFile file;  // the whole payload (train config, summary, fingerprint, ...)
  std::unique_ptr<model::CostModel> model;
};
// ReadModelFile + RestoreModel. Accepts model files and checkpoints.
StatusOr<LoadedModel> LoadModel(const std::string& path);

}  // namespace tpugraphs::train

#endif  // TPUGRAPHS_TRAIN_MODEL_FILE_H_
