# Compiles every .proto below ROOT into one static library. Import paths are relative to ROOT,
# so `import "xla/hlo.proto";` works and generated headers are included as "xla/hlo.pb.h".
function(tpugraphs_add_proto_library target root)
  file(GLOB_RECURSE protos CONFIGURE_DEPENDS ${root}/*.proto)
  set(out_dir ${CMAKE_CURRENT_BINARY_DIR}/generated)
  file(MAKE_DIRECTORY ${out_dir})
  set(srcs)
  foreach(proto ${protos})
    file(RELATIVE_PATH rel ${root} ${proto})
    string(REGEX REPLACE "\\.proto$" "" base ${rel})
    set(cc ${out_dir}/${base}.pb.cc)
    set(h ${out_dir}/${base}.pb.h)
    add_custom_command(
      OUTPUT ${cc} ${h}
      COMMAND protobuf::protoc --cpp_out=${out_dir} -I ${root} ${proto}
      DEPENDS ${proto} protobuf::protoc
      COMMENT "protoc ${rel}")
    list(APPEND srcs ${cc})
  endforeach()
  add_library(${target} STATIC ${srcs})
  tpugraphs_library_pic(${target})
  target_include_directories(${target} PUBLIC ${out_dir})
  target_link_libraries(${target} PUBLIC protobuf::libprotobuf)
endfunction()
