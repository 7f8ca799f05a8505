// Fuzzes `train --config` loading (train/train_config.h): the TrainConfig text proto parser and
// the validation of every option.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "tpugraphs/train/train_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tpugraphs;
  fuzz::InitHarness();
  const std::string& path = fuzz::WriteScratchFile(data, size, ".textproto");
  auto config = train::ReadTrainConfigFile(path);
  if (!config.ok()) return 0;
  if (train::ValidateTrainConfig(*config).ok()) {
    (void)train::OptimizerOptionsOf(*config);
    (void)train::LrScheduleOf(*config, 1000);
    (void)train::CheckpointPathOf(*config);
  }
  return 0;
}
