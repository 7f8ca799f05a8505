// Measurements of a closed tuning loop (docs/tune.md, "Closing the loop"): running the user's
// measure command on a batch of configurations, and the file that keeps every result as it
// arrives, so that a killed or extended run measures nothing twice.
//
// The measurements file (--measurements) is UTF-8 text, one record per line, appended to and
// fsynced after every batch:
//
//   # tpugraphs tune measurements 1
//   <graph id>\t<round>\t<runtime>\t<predicted>\t<config>
//
// graph id is "collection:name"; round the loop's round (1-based) that measured it; runtime the
// measured value as the command printed it (any unit, > 0); predicted the model's score of it
// when the round chose it ("nan" without a model); config "L:" and the layout configuration's
// nc x 18 values, or "T:" and the tile configuration's 24 values, comma-separated. Lines starting
// with '#' are comments. A last line without its newline (a kill mid-write) is dropped with a
// warning and cut off before the next append.
//
// Thread-safety: a MeasurementLog is not thread-safe; the functions are reentrant.
#ifndef TPUGRAPHS_TUNE_MEASUREMENTS_H_
#define TPUGRAPHS_TUNE_MEASUREMENTS_H_

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "tpugraphs/common/status.h"
#include "tpugraphs/tune/search_space.h"

namespace tpugraphs::tune {

struct Measurement {
  std::string graph;  // collection:name
  int64_t round = 0;
  double runtime = 0;
  double predicted = 0;  // NaN without a model
  Config config;
};

class MeasurementLog {
 public:
  // Reads `path` when it exists (else it is created at the first Append); "" keeps the
  // measurements in memory only. Errors name the file and the line.
  static StatusOr<MeasurementLog> Open(const std::string& path);

  // The recorded measurement of `config` on `graph`, or nullptr. The first record wins.
  const Measurement* Find(const std::string& graph, const Config& config) const;
  // Appends the records and makes them durable (flush + fsync) before returning.
  Status Append(const std::vector<Measurement>& records);

  const std::string& path() const { return path_; }
  int64_t size() const { return static_cast<int64_t>(records_.size()); }

 private:
  std::string path_;
  std::vector<Measurement> records_;
  std::unordered_multimap<uint64_t, size_t> index_;  // hash of (graph, config) -> records_
  int64_t keep_bytes_ = -1;  // >= 0: the file's complete lines end here (a torn last line)
};

// One record's line (with its newline), and its parse. `where` names the file and line.
std::string FormatMeasurement(const Measurement& m);
StatusOr<Measurement> ParseMeasurement(const std::string& line, const std::string& where);

// `command` with every "{}" replaced by `path`, single-quoted for /bin/sh. Without "{}" the
// quoted path is appended after a space.
std::string SubstituteCommand(const std::string& command, const std::string& path);

// The runtimes a measure command printed for a batch of `k` configurations: lines
// "index<TAB or spaces>runtime"; lines whose first field is not an integer (a header, messages)
// are ignored. Every index in [0, k) exactly once, each runtime finite and > 0; otherwise an
// error naming the command and the offending line (or the missing indices).
StatusOr<std::vector<double>> ParseMeasureOutput(const std::string& output, int64_t k,
                                                 const std::string& command);

// Runs `command` (SubstituteCommand with `npz`) through /bin/sh, its stderr passed through, and
// parses its stdout. A command that cannot start, exits non-zero or is killed is an error naming
// it.
StatusOr<std::vector<double>> RunMeasureCommand(const std::string& command, const std::string& npz,
                                                int64_t k);

}  // namespace tpugraphs::tune

#endif  // TPUGRAPHS_TUNE_MEASUREMENTS_H_
