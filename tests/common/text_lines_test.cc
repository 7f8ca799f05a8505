#include "tpugraphs/common/text_lines.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tpugraphs {
namespace {

std::vector<std::string> All(std::string_view text, int64_t* last_line_no) {
  TextLines lines(text);
  std::vector<std::string> out;
  std::string_view line;
  while (lines.Next(&line)) {
    out.emplace_back(line);
    EXPECT_EQ(lines.line_no(), static_cast<int64_t>(out.size()));
  }
  *last_line_no = lines.line_no();
  return out;
}

TEST(TextLinesTest, SplitsOnNewlinesAndDropsCarriageReturns) {
  int64_t n = -1;
  EXPECT_EQ(All("a\nbb\r\n\nc", &n), (std::vector<std::string>{"a", "bb", "", "c"}));
  EXPECT_EQ(n, 4);
  // A final newline ends the last line; it does not start an empty one.
  EXPECT_EQ(All("a\r\nb\n", &n), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(n, 2);
  // Only one '\r' directly before the '\n' is a terminator; others are content.
  EXPECT_EQ(All("x\r\r\n\ry", &n), (std::vector<std::string>{"x\r", "\ry"}));
}

TEST(TextLinesTest, EmptyTextHasNoLines) {
  int64_t n = -1;
  EXPECT_TRUE(All("", &n).empty());
  EXPECT_EQ(n, 0);
  EXPECT_EQ(All("\n", &n), (std::vector<std::string>{""}));
  EXPECT_EQ(n, 1);
}

}  // namespace
}  // namespace tpugraphs
