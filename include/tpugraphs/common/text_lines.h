// Splits a text into lines for the line-oriented file parsers (predictions, submissions): '\n'
// ends a line, a '\r' before it is dropped (CRLF files), a last line without '\n' counts, and
// line numbers start at 1 for error messages.
//
// Thread-safety: one TextLines per thread; the text must outlive it.
#ifndef TPUGRAPHS_COMMON_TEXT_LINES_H_
#define TPUGRAPHS_COMMON_TEXT_LINES_H_

#include <cstdint>
#include <string_view>

namespace tpugraphs {

class TextLines {
 public:
  explicit TextLines(std::string_view text) : text_(text) {}

  // Sets *line to the next line (without its terminator) and returns true, or returns false at
  // the end of the text.
  bool Next(std::string_view* line) {
    if (pos_ >= text_.size()) return false;
    size_t end = text_.find('\n', pos_);
    if (end == std::string_view::npos) end = text_.size();
    *line = text_.substr(pos_, end - pos_);
    pos_ = end + 1;
    ++line_no_;
    if (!line->empty() && line->back() == '\r') line->remove_suffix(1);
    return true;
  }

  // Number of the line the last Next returned (0 before the first).
  int64_t line_no() const { return line_no_; }

 private:
  std::string_view text_;
  size_t pos_ = 0;
  int64_t line_no_ = 0;
};

}  // namespace tpugraphs

#endif  // TPUGRAPHS_COMMON_TEXT_LINES_H_
