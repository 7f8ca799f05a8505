// What the files of the Python extension module share: the error type every library Status
// becomes, and the registration of each file's functions.
#ifndef TPUGRAPHS_PYTHON_BINDINGS_H_
#define TPUGRAPHS_PYTHON_BINDINGS_H_

#include <pybind11/pybind11.h>

#include <stdexcept>
#include <utility>

#include "tpugraphs/common/status.h"

namespace tpugraphs::python {

// Raised as tpugraphs.Error (a RuntimeError) with the Status message; its `code` attribute is
// the StatusCode's name in lower case ("no_matching_graphs", "usage", "invalid_argument", ...).
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, StatusCode code = StatusCode::kInvalidArgument)
      : std::runtime_error(message), code_(code) {}
  StatusCode code() const { return code_; }

 private:
  StatusCode code_;
};

inline void Check(const Status& s) {
  if (!s.ok()) throw Error(s.message(), s.code());
}
template <typename T>
T Unwrap(StatusOr<T> s) {
  if (!s.ok()) throw Error(s.status().message(), s.status().code());
  return std::move(s).value();
}

// tpugraphs.train, tune, evaluate, synth and the forwarding of the library's log to `logging`
// (runs.cc).
void BindRuns(pybind11::module_& m);

}  // namespace tpugraphs::python

#endif  // TPUGRAPHS_PYTHON_BINDINGS_H_
