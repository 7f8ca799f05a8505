// Config protos filled from text, field by field: the one way the command line's flags and the
// Python keywords set TrainConfig, TuneConfig and the other run descriptions.
//
// A field is named by its path: "learning_rate", or "model.hidden_dim" for a field of a
// submessage. Its flag is the last part with dashes ("--hidden-dim"), its Python keyword the
// last part as it is ("hidden_dim"). Enum values are written as the lower-case suffix of the
// value's name after the enum's own name (OPTIMIZER_ADAMW of enum Optimizer: "adamw").
//
// Thread-safety: free functions; reentrant.
#ifndef TPUGRAPHS_COMMON_PROTO_FIELDS_H_
#define TPUGRAPHS_COMMON_PROTO_FIELDS_H_

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <string>
#include <string_view>
#include <vector>

#include "tpugraphs/common/status.h"

namespace tpugraphs {

struct ProtoFieldPath {
  // The submessage field holding `field` ("model" of "model.hidden_dim"), or nullptr.
  const google::protobuf::FieldDescriptor* parent = nullptr;
  const google::protobuf::FieldDescriptor* field = nullptr;  // nullptr: no such field
};

// Resolves "name" or "submessage.name" in `descriptor`.
ProtoFieldPath ResolveFieldPath(const google::protobuf::Descriptor* descriptor,
                                std::string_view path);

// The field a keyword names (a Python keyword argument, or a flag without its dashes): the field
// of `descriptor` of that name, else the field of that name in one of its singular message
// fields ("hidden_dim" -> "model.hidden_dim"). No match: field == nullptr.
ProtoFieldPath FindFieldByKeyword(const google::protobuf::Descriptor* descriptor,
                                  std::string_view name);

// The flag of a field name: "learning_rate" -> "--learning-rate".
std::string FieldFlagName(std::string_view field_name);

// OPTIMIZER_ADAMW of enum Optimizer -> "adamw".
std::string EnumValueFlagName(const google::protobuf::EnumDescriptor* e, int index);

// "adamw|adam" for an enum field, "" for any other.
std::string EnumChoices(const google::protobuf::FieldDescriptor* field);

// The value `message` holds in singular field `field`, as a flag's help shows a default.
std::string FieldValueString(const google::protobuf::Message& message,
                             const google::protobuf::FieldDescriptor* field);

// The proto default as a flag's help shows it: 0.001, true, adamw, "" (strings quoted).
std::string FieldDefaultString(const google::protobuf::FieldDescriptor* field);

// Sets the field at `path` of `root` from `text` (an integer, number, true/false/1/0, an enum
// value's flag name or any string). A repeated field gets `text` appended as one more element.
// Errors are kUsage and name `name_for_errors` (the flag or keyword):
// "usage: --epochs: expected an integer, got \"x\"".
Status SetFieldFromText(google::protobuf::Message* root, const ProtoFieldPath& path,
                        std::string_view name_for_errors, std::string_view text);

// Clears every singular field set to its default value, in `message` and its submessages, and
// every submessage left empty, so that two messages that mean the same settings print and
// serialize the same, whether a default was written out or left unset. Repeated fields are kept.
void ClearDefaultFields(google::protobuf::Message* message);

}  // namespace tpugraphs

#endif  // TPUGRAPHS_COMMON_PROTO_FIELDS_H_
