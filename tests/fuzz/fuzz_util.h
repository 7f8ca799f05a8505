// Helpers shared by the libFuzzer harnesses in tests/fuzz (docs/fuzzing.md).
//
// Most readers take a path, so a harness writes its input to a scratch file first: one file per
// process and suffix, overwritten by every run and removed at exit.
#ifndef TPUGRAPHS_TESTS_FUZZ_FUZZ_UTIL_H_
#define TPUGRAPHS_TESTS_FUZZ_FUZZ_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tpugraphs::fuzz {

// Silences the library's logging (called once per process by every harness).
void InitHarness();

// Writes `size` bytes to the scratch file for `suffix` (e.g. ".npz") and returns its path.
// Aborts if the file cannot be written: that is a harness problem, never an input's.
const std::string& WriteScratchFile(const uint8_t* data, size_t size, std::string_view suffix);

// The path of a second scratch file (for outputs a reader needs, e.g. a dataset being written).
std::string ScratchPath(std::string_view suffix);

// Aborts with `message` on stderr: for invariants a successful read must satisfy.
[[noreturn]] void Fail(std::string_view message);

}  // namespace tpugraphs::fuzz

#endif  // TPUGRAPHS_TESTS_FUZZ_FUZZ_UTIL_H_
