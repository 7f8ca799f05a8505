// Fuzzes the model and checkpoint reader (train/model_file.h): header, payload proto, the
// stored model spec, feature transform and parameters, and the self tests run on load.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "tpugraphs/train/model_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tpugraphs;
  fuzz::InitHarness();
  const std::string& path = fuzz::WriteScratchFile(data, size, ".tpm");
  (void)train::LoadModel(path);
  return 0;
}
