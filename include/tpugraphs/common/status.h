// Status and StatusOr: how every library function reports failure.
//
// The library never throws for bad input and never aborts on it: functions that can fail return
// a Status (or StatusOr<T>) whose message names the file and the problem. The CLI maps a non-OK
// status to exit code 1. Assertions are reserved for programmer errors.
//
// Thread-safety: Status and StatusOr are value types; distinct objects may be used concurrently.
#ifndef TPUGRAPHS_COMMON_STATUS_H_
#define TPUGRAPHS_COMMON_STATUS_H_

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace tpugraphs {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // bad flag or config value, malformed input content
  kNotFound,            // a file, key or graph that does not exist
  kDataLoss,            // truncated or corrupted file (bad CRC, short read)
  kIoError,             // the operating system refused a read or write
  kFailedPrecondition,  // inputs are individually fine but do not fit together
  kOutOfRange,          // an index or value outside its allowed range
  kResourceExhausted,   // a declared size larger than we are willing to allocate
  kUnimplemented,       // a valid input using a feature this build does not support
  kInternal,            // a broken invariant (a bug)
  // Flags or options that do not fit together, or one missing (the command line's fault, not the
  // data's): the CLI exits with 2 for it, 1 for the others.
  kUsage,
  // No graph of a dataset matches the selection (collection, split, names): the CLI exits
  // with 3, so that scripts can tell "nothing to do here" from a failure without reading the
  // message.
  kNoMatchingGraphs,
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "invalid argument: <message>", or "OK".
  std::string ToString() const;

  // Returns a copy whose message is "<context>: <message>". OK stays OK.
  Status WithContext(std::string_view context) const;

  bool operator==(const Status& other) const {
    return code_ == other.code_ && message_ == other.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

Status InvalidArgumentError(std::string message);
// A usage error (StatusCode::kUsage); the message says what to give, e.g. "usage: --explain
// needs --data".
Status UsageError(std::string message);
// StatusCode::kNoMatchingGraphs.
Status NoMatchingGraphsError(std::string message);
Status NotFoundError(std::string message);
Status DataLossError(std::string message);
Status IoError(std::string message);
Status FailedPreconditionError(std::string message);
Status OutOfRangeError(std::string message);
Status ResourceExhaustedError(std::string message);
Status UnimplementedError(std::string message);
Status InternalError(std::string message);

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const Status& status) : status_(status) {  // NOLINT: implicit by design
    assert(!status_.ok() && "StatusOr constructed from an OK status without a value");
    if (status_.ok()) status_ = InternalError("StatusOr constructed from OK status");
  }
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  // REQUIRES: ok().
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace tpugraphs

#define TPUG_STATUS_CONCAT_INNER_(a, b) a##b
#define TPUG_STATUS_CONCAT_(a, b) TPUG_STATUS_CONCAT_INNER_(a, b)

// Returns from the current function if `expr` yields a non-OK Status.
#define TPUG_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::tpugraphs::Status tpug_status_ = (expr);   \
    if (!tpug_status_.ok()) return tpug_status_; \
  } while (false)

// `TPUG_ASSIGN_OR_RETURN(auto x, MakeX());` declares x from a StatusOr or returns its error.
#define TPUG_ASSIGN_OR_RETURN(lhs, expr) \
  TPUG_ASSIGN_OR_RETURN_IMPL_(TPUG_STATUS_CONCAT_(tpug_statusor_, __LINE__), lhs, expr)
#define TPUG_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()

#endif  // TPUGRAPHS_COMMON_STATUS_H_
