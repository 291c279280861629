# Finds gRPC (C++), protobuf, protoc and grpc_cpp_plugin for plugins/ring-grpc. Sets
#   CHORUS_RING_GRPC_FOUND       TRUE when all four are present
#   CHORUS_RING_GRPC_MISSING     what is missing, for the message otherwise
#   CHORUS_RING_GRPC_LIBRARIES   targets to link (grpc++ and protobuf)
#   CHORUS_PROTOC, CHORUS_GRPC_CPP_PLUGIN  the two code generators
# Tries gRPC's CMake package first (Debian 12 ships one), then pkg-config (grpc++, protobuf).
set(CHORUS_RING_GRPC_FOUND FALSE)
set(CHORUS_RING_GRPC_MISSING "")
set(CHORUS_RING_GRPC_LIBRARIES "")

find_package(gRPC CONFIG QUIET)
if(TARGET gRPC::grpc++ AND TARGET protobuf::libprotobuf)
  set(CHORUS_RING_GRPC_LIBRARIES gRPC::grpc++ protobuf::libprotobuf)
else()
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(CHORUS_GRPCXX QUIET IMPORTED_TARGET grpc++ protobuf)
    if(CHORUS_GRPCXX_FOUND)
      set(CHORUS_RING_GRPC_LIBRARIES PkgConfig::CHORUS_GRPCXX)
    endif()
  endif()
endif()
if(NOT CHORUS_RING_GRPC_LIBRARIES)
  list(APPEND CHORUS_RING_GRPC_MISSING "gRPC C++ and protobuf libraries")
endif()

# Cache entries: -DCHORUS_PROTOC=... and -DCHORUS_GRPC_CPP_PLUGIN=... override them.
find_program(CHORUS_PROTOC protoc)
find_program(CHORUS_GRPC_CPP_PLUGIN grpc_cpp_plugin)
if(NOT CHORUS_PROTOC)
  list(APPEND CHORUS_RING_GRPC_MISSING "protoc")
endif()
if(NOT CHORUS_GRPC_CPP_PLUGIN)
  list(APPEND CHORUS_RING_GRPC_MISSING "grpc_cpp_plugin")
endif()

if(NOT CHORUS_RING_GRPC_MISSING)
  set(CHORUS_RING_GRPC_FOUND TRUE)
else()
  list(JOIN CHORUS_RING_GRPC_MISSING ", " CHORUS_RING_GRPC_MISSING)
endif()
