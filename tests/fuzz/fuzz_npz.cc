// Fuzzes the npz reader (io/npz.h) and the release-file loader `ingest` uses on .npz inputs
// (ingest/release_npz.h): every key's header, whole reads, chunked reads, then the release
// graph itself.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "tpugraphs/common/graph.h"
#include "tpugraphs/ingest/release_npz.h"
#include "tpugraphs/io/npz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tpugraphs;
  fuzz::InitHarness();
  const std::string& path = fuzz::WriteScratchFile(data, size, ".npz");
  {
    auto npz = io::NpzReader::Open(path);
    if (!npz.ok()) return 0;
    const io::NpzReader& reader = **npz;
    for (const std::string& key : reader.Keys()) {
      if (!reader.Has(key)) fuzz::Fail("listed key not found: " + key);
      auto header = reader.Header(key);
      if (!header.ok()) continue;
      (void)reader.Read<double>(key);
      (void)reader.Read<int64_t>(key);
      int64_t seen = 0;
      (void)reader.ReadChunked<float>(key, 1000,
                                      [&](const float*, int64_t count, int64_t first) -> Status {
                                        if (first != seen || count <= 0 || count > 1000) {
                                          fuzz::Fail("ReadChunked chunk out of order");
                                        }
                                        seen += count;
                                        return Status::Ok();
                                      });
    }
  }
  auto shape = ingest::InspectReleaseNpz(path);
  if (!shape.ok()) return 0;
  const std::string collection = shape->kind == TaskKind::kLayout ? "layout:xla:random" : "";
  auto graph = ingest::LoadReleaseNpz(path, collection, "train", "fuzz");
  if (graph.ok()) {
    Status valid = ValidateGraph(*graph, "fuzz.npz");
    if (!valid.ok()) fuzz::Fail("LoadReleaseNpz returned an invalid graph: " + valid.message());
  }
  return 0;
}
