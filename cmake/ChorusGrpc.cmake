# Finds gRPC (C++), protobuf, protoc and grpc_cpp_plugin, for plugins/ring-grpc and
# parameter_server/ (the only parts of chorus that use them). Sets
#   CHORUS_GRPC_FOUND       TRUE when all four are present
#   CHORUS_GRPC_MISSING     what is missing, for the message otherwise
#   CHORUS_GRPC_LIBRARIES   targets to link (grpc++ and protobuf)
#   CHORUS_PROTOC, CHORUS_GRPC_CPP_PLUGIN  the two code generators
# Tries gRPC's CMake package first (Debian 12 ships one), then pkg-config (grpc++, protobuf).
set(CHORUS_GRPC_FOUND FALSE)
set(CHORUS_GRPC_MISSING "")
set(CHORUS_GRPC_LIBRARIES "")

find_package(gRPC CONFIG QUIET)
if(TARGET gRPC::grpc++ AND TARGET protobuf::libprotobuf)
  set(CHORUS_GRPC_LIBRARIES gRPC::grpc++ protobuf::libprotobuf)
else()
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(CHORUS_GRPCXX QUIET IMPORTED_TARGET grpc++ protobuf)
    if(CHORUS_GRPCXX_FOUND)
      set(CHORUS_GRPC_LIBRARIES PkgConfig::CHORUS_GRPCXX)
    endif()
  endif()
endif()
if(NOT CHORUS_GRPC_LIBRARIES)
  list(APPEND CHORUS_GRPC_MISSING "gRPC C++ and protobuf libraries")
endif()

# Cache entries: -DCHORUS_PROTOC=... and -DCHORUS_GRPC_CPP_PLUGIN=... override them.
find_program(CHORUS_PROTOC protoc)
find_program(CHORUS_GRPC_CPP_PLUGIN grpc_cpp_plugin)
if(NOT CHORUS_PROTOC)
  list(APPEND CHORUS_GRPC_MISSING "protoc")
endif()
if(NOT CHORUS_GRPC_CPP_PLUGIN)
  list(APPEND CHORUS_GRPC_MISSING "grpc_cpp_plugin")
endif()

if(NOT CHORUS_GRPC_MISSING)
  set(CHORUS_GRPC_FOUND TRUE)
else()
  list(JOIN CHORUS_GRPC_MISSING ", " CHORUS_GRPC_MISSING)
endif()

# chorus_grpc_generate(<target> <proto file>): an OBJECT library <target> of the proto's messages
# and gRPC service (protoc + grpc_cpp_plugin), compiled apart so that the generated code's
# warnings do not fail the build; its generated headers are a SYSTEM include directory.
function(chorus_grpc_generate target proto)
  get_filename_component(proto_dir ${proto} DIRECTORY)
  get_filename_component(proto_name ${proto} NAME_WE)
  set(out ${CMAKE_CURRENT_BINARY_DIR}/generated)
  set(sources ${out}/${proto_name}.pb.cc ${out}/${proto_name}.pb.h
              ${out}/${proto_name}.grpc.pb.cc ${out}/${proto_name}.grpc.pb.h)
  file(MAKE_DIRECTORY ${out})
  add_custom_command(
    OUTPUT ${sources}
    COMMAND ${CHORUS_PROTOC} --proto_path=${proto_dir} --cpp_out=${out} --grpc_out=${out}
            --plugin=protoc-gen-grpc=${CHORUS_GRPC_CPP_PLUGIN} ${proto}
    DEPENDS ${proto}
    COMMENT "protoc: ${proto_name}.proto -> C++ messages and gRPC service"
    VERBATIM)
  add_library(${target} OBJECT ${out}/${proto_name}.pb.cc ${out}/${proto_name}.grpc.pb.cc)
  set_target_properties(${target} PROPERTIES
    POSITION_INDEPENDENT_CODE ON
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  target_include_directories(${target} SYSTEM PUBLIC ${out})
  target_link_libraries(${target} PUBLIC ${CHORUS_GRPC_LIBRARIES})
endfunction()
