// Command-line flags generated from a config proto: one option per field listed, named after the
// field (common/proto_fields.h), its help text from the table with the enum choices and the
// proto default appended. Only the help texts are written by hand; tests check that every
// field of the config has one.
#ifndef TPUGRAPHS_CLI_PROTO_FLAGS_H_
#define TPUGRAPHS_CLI_PROTO_FLAGS_H_

#include <google/protobuf/message.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tpugraphs/common/proto_fields.h"
#include "tpugraphs/common/status.h"

namespace tpugraphs::cli {

struct ProtoFlagHelp {
  const char* path;  // "field", or "submessage.field"
  const char* help;
  const char* aliases = "";    // more names of the option, e.g. ",-o" or ",--dataset"
  const char* flag = nullptr;  // the flag, when not the field's name with dashes
};

class ProtoFlags {
 public:
  // Adds an option to `cmd` for every entry of `table` that names a field of `descriptor`
  // (entries naming none are skipped; the flags tests catch them). A repeated field's flag may
  // be given several times, and each value may be a comma-separated list (0.7,0.15,0.15).
  // `defaults`, when given, is the message whose values the help shows as defaults (for protos
  // whose defaults are not the proto's own, as proto3 ones); else the proto defaults.
  ProtoFlags(CLI::App* cmd, const google::protobuf::Descriptor* descriptor,
             std::span<const ProtoFlagHelp> table,
             const google::protobuf::Message* defaults = nullptr);

  // Sets in `config` every field whose flag was given, over what it held (a repeated field's
  // values are replaced by the flag's).
  Status Apply(google::protobuf::Message* config) const;

  // The option of a field path, or nullptr (e.g. to mark it required or excluding another).
  CLI::Option* option(const std::string& path) const;

 private:
  struct Entry {
    std::string path;
    ProtoFieldPath field;
    CLI::Option* option = nullptr;
    std::unique_ptr<std::string> value;                // a single field's flag
    std::unique_ptr<std::vector<std::string>> values;  // a repeated field's flag
  };
  std::vector<Entry> entries_;
};

}  // namespace tpugraphs::cli

#endif  // TPUGRAPHS_CLI_PROTO_FLAGS_H_
