#include "tpugraphs/ingest/raw_dump.h"

namespace tpugraphs::ingest {

std::string_view RawDumpKindName(RawDumpKind kind) {
  switch (kind) {
    case RawDumpKind::kModuleTuningData: return "ModuleTuningData";
    case RawDumpKind::kTuningData: return "TuningData";
    case RawDumpKind::kHloModule: return "HloModuleProto";
    case RawDumpKind::kHloProto: return "HloProto";
  }
  return "unknown";
}

StatusOr<RawDumpKind> DetectRawDumpKind(std::string_view, const std::string& path) {
  return UnimplementedError(path + ": raw dump ingest is not built yet");
}

StatusOr<std::vector<Graph>> LoadRawDump(const std::string& path, const RawDumpOptions&) {
  return UnimplementedError(path + ": raw dump ingest is not built yet");
}

}  // namespace tpugraphs::ingest
