#include "device_programs.h"

#include <algorithm>
#include <chorus/plugin_sdk.hpp>
#include <memory>
#include <string>
#include <vector>

#include "pjrt_device_context.h"
#include "stablehlo_programs.h"

struct chorus_device_program {
  std::shared_ptr<const chorus::tpu::PjrtExecutable> executable;
  // The same program with each carried argument donated to its result, for the runs that write
  // every carried value over its argument's allocation (compiled on the first such run).
  std::string donating_text;
  std::vector<int64_t> device_ids;
  uint32_t num_carried = 0;
  std::vector<uint32_t> devices;  // replica r's device
  std::vector<uint64_t> argument_bytes;
  std::vector<uint64_t> result_bytes;
};

namespace chorus::tpu {
namespace {

using sdk::Fail;
using sdk::Guard;

chorus_status Compile(chorus_device_context* ctx, const chorus_program_compile_args* args,
                      chorus_device_program** out) {
  return Guard([&] {
    if (out == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "tpu compile: out is NULL");
    *out = nullptr;
    const auto& a = sdk::RequireArgs(
        args, CHORUS_STRUCT_SIZE(chorus_program_compile_args, num_carried), "tpu compile");
    if (ctx == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "tpu compile: no device context");
    if (ctx->client == nullptr) Fail(CHORUS_UNSUPPORTED, "tpu compile: no PJRT plugin is loaded");
    if (a.format == nullptr || std::string(a.format) != "stablehlo") {
      Fail(CHORUS_UNSUPPORTED, "tpu compile: format '", a.format ? a.format : "(null)",
           "' is not one this plugin compiles; it compiles \"stablehlo\" (MLIR text)");
    }
    if (a.code == nullptr || a.code_size == 0)
      Fail(CHORUS_INVALID_ARGUMENT, "tpu compile: no code");
    if (a.device_indices == nullptr || a.num_replicas == 0) {
      Fail(CHORUS_INVALID_ARGUMENT, "tpu compile: no replicas");
    }
    // Replica r runs on device_indices[r]: the compile options' device assignment.
    const size_t available = ctx->client->addressable_devices().size();
    std::vector<uint32_t> devices(a.device_indices, a.device_indices + a.num_replicas);
    for (size_t r = 0; r < devices.size(); ++r) {
      if (devices[r] >= available) {
        Fail(CHORUS_INVALID_ARGUMENT, "tpu compile: replica ", r, " is on device ", devices[r],
             ", which does not exist (", available, " PJRT devices)");
      }
      if (std::find(devices.begin(), devices.begin() + static_cast<std::ptrdiff_t>(r),
                    devices[r]) != devices.begin() + static_cast<std::ptrdiff_t>(r)) {
        Fail(CHORUS_INVALID_ARGUMENT, "tpu compile: device ", devices[r],
             " is given twice; a program runs one replica per device");
      }
    }
    const std::string code(a.code, a.code_size);
    const MainSignature signature = ReadMainSignature(code);
    const std::string program = ReplicaStepProgram(code, signature, a.steps, a.num_carried,
                                                   static_cast<int>(a.num_replicas));
    auto compiled = std::make_unique<chorus_device_program>();
    compiled->device_ids = DeviceAssignment(*ctx, devices);
    compiled->executable = ctx->programs.Get(
        *ctx->client, program, static_cast<int>(a.num_replicas), false, compiled->device_ids);
    if (a.num_carried > 0) {
      compiled->donating_text = ReplicaStepProgram(code, signature, a.steps, a.num_carried,
                                                   static_cast<int>(a.num_replicas), true);
    }
    compiled->num_carried = a.num_carried;
    compiled->devices = std::move(devices);
    const size_t inputs = signature.arguments.size() - a.num_carried;
    const size_t outputs = signature.results.size() - a.num_carried;
    for (uint32_t i = 0; i < a.num_carried; ++i) {
      compiled->argument_bytes.push_back(signature.arguments[i].bytes());
      compiled->result_bytes.push_back(signature.results[i].bytes());
    }
    for (uint32_t s = 0; s < a.steps; ++s) {
      for (size_t k = 0; k < inputs; ++k) {
        compiled->argument_bytes.push_back(signature.arguments[a.num_carried + k].bytes());
      }
      for (size_t j = 0; j < outputs; ++j) {
        compiled->result_bytes.push_back(signature.results[a.num_carried + j].bytes());
      }
    }
    *out = compiled.release();
  });
}

chorus_status Signature(chorus_device_program* program, chorus_program_signature* out) {
  return Guard([&] {
    if (program == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "tpu signature: program is NULL");
    if (out == nullptr ||
        out->struct_size < CHORUS_STRUCT_SIZE(chorus_program_signature, result_bytes)) {
      Fail(CHORUS_INVALID_ARGUMENT, "tpu signature: out is NULL or smaller than the 1.4 struct");
    }
    out->num_arguments = program->argument_bytes.size();
    out->argument_bytes = program->argument_bytes.data();
    out->num_results = program->result_bytes.size();
    out->result_bytes = program->result_bytes.data();
  });
}

// The allocation that `address` is the whole of, on `device`.
HandleMemory::Allocation WholeAllocation(const chorus_device_context& ctx, uint32_t device,
                                         const void* address, uint64_t bytes, const char* what,
                                         size_t replica, size_t index) {
  if (address == nullptr)
    Fail(CHORUS_INVALID_ARGUMENT, "tpu execute: ", what, " ", index, " of replica ", replica,
         " is NULL");
  const HandleMemory::Place place = ctx.memory.Find(device, address, bytes, what);
  if (place.offset != 0 || place.allocation.bytes != bytes) {
    Fail(CHORUS_INVALID_ARGUMENT, "tpu execute: ", what, " ", index, " of replica ", replica,
         " is not a whole allocation of ", bytes, " bytes (offset ", place.offset, " in one of ",
         place.allocation.bytes, "); a program's buffers must be whole allocations");
  }
  return place.allocation;
}

chorus_status Execute(chorus_device_context* ctx, const chorus_program_execute_args* args) {
  return Guard([&] {
    const auto& a = sdk::RequireArgs(
        args, CHORUS_STRUCT_SIZE(chorus_program_execute_args, timeout_ms), "tpu execute");
    if (ctx == nullptr || ctx->client == nullptr) {
      Fail(CHORUS_INVALID_ARGUMENT, "tpu execute: no device context with a PJRT client");
    }
    if (a.program == nullptr) Fail(CHORUS_INVALID_ARGUMENT, "tpu execute: program is NULL");
    const chorus_device_program& program = *a.program;
    if (a.num_arguments != program.argument_bytes.size() ||
        a.num_results != program.result_bytes.size()) {
      Fail(CHORUS_INVALID_ARGUMENT, "tpu execute: ", a.num_arguments, " arguments and ",
           a.num_results, " results per replica for a program of ", program.argument_bytes.size(),
           " and ", program.result_bytes.size());
    }
    if ((a.num_arguments > 0 && a.arguments == nullptr) ||
        (a.num_results > 0 && a.results == nullptr)) {
      Fail(CHORUS_INVALID_ARGUMENT, "tpu execute: arguments or results are NULL");
    }
    const size_t replicas = program.devices.size();
    std::vector<std::vector<std::shared_ptr<PjrtBuffer>>> held(replicas);
    std::vector<std::vector<pjrt::PJRT_Buffer*>> handles(replicas);
    std::vector<std::vector<HandleMemory::Allocation>> arguments(replicas), results(replicas);
    for (size_t r = 0; r < replicas; ++r) {
      const uint32_t device = program.devices[r];
      for (size_t i = 0; i < a.num_arguments; ++i) {
        arguments[r].push_back(WholeAllocation(*ctx, device, a.arguments[r * a.num_arguments + i],
                                               program.argument_bytes[i], "argument", r, i));
        held[r].push_back(CurrentBuffer(*ctx, arguments[r].back()));
        handles[r].push_back(held[r].back()->handle());
      }
      for (size_t j = 0; j < a.num_results; ++j) {
        results[r].push_back(WholeAllocation(*ctx, device, a.results[r * a.num_results + j],
                                             program.result_bytes[j], "result", r, j));
      }
    }
    // Donate the carried arguments when each is overwritten by its own result and is no other
    // argument or result: the plugin may then reuse their memory (a model's parameters).
    bool donate = !program.donating_text.empty();
    for (size_t r = 0; donate && r < replicas; ++r) {
      for (uint32_t i = 0; donate && i < program.num_carried; ++i) {
        const HandleMemory::Contents* carried = arguments[r][i].contents.get();
        donate = results[r][i].contents.get() == carried;
        for (size_t k = 0; donate && k < a.num_arguments; ++k) {
          donate = k == i || arguments[r][k].contents.get() != carried;
        }
        for (size_t k = 0; donate && k < a.num_results; ++k) {
          donate = k == i || results[r][k].contents.get() != carried;
        }
      }
    }
    const std::shared_ptr<const PjrtExecutable> executable =
        donate ? ctx->programs.Get(*ctx->client, program.donating_text, static_cast<int>(replicas),
                                   false, program.device_ids)
               : program.executable;
    const std::chrono::milliseconds timeout =
        a.timeout_ms < 0 ? ctx->timeout : std::chrono::milliseconds(a.timeout_ms);
    std::vector<std::vector<PjrtBuffer>> outputs =
        ctx->client->Execute(*executable, handles, timeout);
    for (size_t r = 0; r < replicas; ++r) {
      for (size_t j = 0; j < a.num_results; ++j) {
        HandleMemory::Contents& contents = *results[r][j].contents;
        std::lock_guard<std::mutex> lock(contents.mutex);
        contents.buffer = std::make_shared<PjrtBuffer>(std::move(outputs.at(r).at(j)));
      }
    }
  });
}

void Destroy(chorus_device_program* program) { delete program; }

}  // namespace

const chorus_device_programs_extension* PjrtDeviceProgramsExtension() {
  static const chorus_device_programs_extension extension = [] {
    chorus_device_programs_extension e{};
    e.base.struct_size = sizeof e;
    e.base.type = CHORUS_EXTENSION_DEVICE_PROGRAMS;
    e.base.next = nullptr;
    e.platform = "pjrt";
    e.compile = Compile;
    e.signature = Signature;
    e.execute = Execute;
    e.destroy = Destroy;
    return e;
  }();
  return &extension;
}

}  // namespace chorus::tpu
