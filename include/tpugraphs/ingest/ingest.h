// The `tpugraphs ingest` driver: many input files (release .npz files, raw XLA dumps, whole
// directory trees) -> one dataset file (docs/ingest.md).
//
// Inputs are expanded (directories recursively, hidden entries skipped) and sorted; each file's
// kind is told from its content (zip magic -> release .npz, anything else -> raw dump). Files are
// loaded in parallel but written in sorted path order, so the dataset does not depend on the
// thread count. Layout .npz files with more config values than
// IngestConfig.stream_threshold_values are streamed into the dataset chunk by chunk, so memory
// stays bounded by the largest graph's arrays plus one config chunk.
//
// Thread-safety: RunIngest may be called concurrently with different outputs.
#ifndef TPUGRAPHS_INGEST_INGEST_H_
#define TPUGRAPHS_INGEST_INGEST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tpugraphs/common/status.h"
#include "tpugraphs/ingest_config.pb.h"

namespace tpugraphs::ingest {

// Checks every field (before any I/O); messages name the flag.
Status ValidateIngestConfig(const IngestConfig& config);

// The input files named by `inputs`: files as given, directories searched recursively (entries
// whose name starts with '.' are skipped). Sorted, without duplicates. NotFound for a missing
// input; InvalidArgument if nothing is found.
StatusOr<std::vector<std::string>> ExpandInputs(const std::vector<std::string>& inputs);
// As above, and inside directories the XLA dump files (named module_<digits>.*) are kept only
// if they are of stage `hlo_stage`: named ...<hlo_stage>.txt, .<hlo_stage>.pb or
// .<hlo_stage>.hlo.pb. Files given by name are always kept. Empty `hlo_stage`: no filter.
StatusOr<std::vector<std::string>> ExpandInputs(const std::vector<std::string>& inputs,
                                                const std::string& hlo_stage);

// True if `file_name` (no directory) is an XLA dump file name, module_<digits>.<rest>.
bool IsXlaDumpFileName(const std::string& file_name);
// True if the XLA dump file `file_name` is of `stage` (see ExpandInputs).
bool IsXlaDumpOfStage(const std::string& file_name, const std::string& stage);

enum class InputKind { kReleaseNpz, kRawDump };
// Zip local-file or end-of-archive magic -> kReleaseNpz, anything else -> kRawDump.
StatusOr<InputKind> DetectInputKind(const std::string& path);

struct CollectionTotals {
  std::string collection;
  int64_t graphs = 0, nodes = 0, edges = 0, configs = 0;
};

struct IngestSummary {
  std::string output;
  int64_t files = 0;    // input files found
  int64_t graphs = 0;   // graphs written
  int64_t skipped = 0;  // files skipped with --keep-going
  std::vector<std::string> skipped_files;
  std::vector<CollectionTotals> collections;  // sorted by collection
  uint64_t output_bytes = 0;
  double seconds = 0;
};

// Runs the whole ingest. On error nothing is written (the output is committed only at the end).
StatusOr<IngestSummary> RunIngest(const IngestConfig& config);

// A readable table, or one JSON object when `json`.
std::string FormatIngestSummary(const IngestSummary& summary, bool json);

}  // namespace tpugraphs::ingest

#endif  // TPUGRAPHS_INGEST_INGEST_H_
