#include <chorus/base/error.h>
#include <chorus/runtime/device_program.h>

#include "runtime/plugin_call.h"

namespace chorus {
namespace {

const chorus_device_programs_extension* ExtensionOf(const Device& device) {
  if (device.enumerator == nullptr) return nullptr;
  return device.enumerator->library().device_programs(device.enumerator->platform());
}

[[noreturn]] void ThrowPlugin(const Device& device, chorus_status status, const std::string& what) {
  throw Error(status, internal::PluginWords(device.enumerator->library()) + ": " + what +
                          " failed with " + StatusName(status) + ": " +
                          device.enumerator->library().LastError());
}

}  // namespace

std::unique_ptr<DeviceProgram> DeviceProgram::Compile(const std::vector<Device>& replicas,
                                                      std::string_view format,
                                                      std::string_view code, uint32_t steps,
                                                      uint32_t num_carried) {
  if (replicas.empty()) throw Error(CHORUS_INVALID_ARGUMENT, "DeviceProgram: no replicas");
  if (steps == 0) throw Error(CHORUS_INVALID_ARGUMENT, "DeviceProgram: steps must be 1 or more");
  const Device& first = replicas.front();
  for (const Device& device : replicas) {
    if (device.enumerator != first.enumerator) {
      throw Error(CHORUS_INVALID_ARGUMENT,
                  "DeviceProgram: the replicas' devices " + first.name() + " and " + device.name() +
                      " belong to different device enumerators; a program runs "
                      "on the devices of one");
    }
  }
  const chorus_device_programs_extension* extension = ExtensionOf(first);
  if (extension == nullptr) {
    throw Error(CHORUS_UNSUPPORTED,
                "DeviceProgram: the devices of enumerator '" + first.enumerator->platform() +
                    "' (plugin " + first.enumerator->library().name() +
                    ") do not run compiled programs (its plugin offers no device programs "
                    "extension); run the step as a function instead");
  }
  std::unique_ptr<DeviceProgram> program(new DeviceProgram());
  program->replicas_ = replicas;
  program->extension_ = extension;
  std::vector<uint32_t> indices;
  for (const Device& device : replicas) indices.push_back(device.index);
  const std::string format_text(format);
  chorus_program_compile_args args{};
  args.struct_size = sizeof args;
  args.format = format_text.c_str();
  args.code = code.data();
  args.code_size = code.size();
  args.device_indices = indices.data();
  args.num_replicas = indices.size();
  args.steps = steps;
  args.num_carried = num_carried;
  const PluginLibrary& library = first.enumerator->library();
  auto describe = [&] { return internal::PluginWords(library) + ": its compile of a program"; };
  chorus_status status = internal::CallPlugin(describe, [&] {
    return extension->compile(first.enumerator->context(), &args, &program->program_);
  });
  if (status != CHORUS_OK) ThrowPlugin(first, status, "compiling a " + format_text + " program");
  chorus_program_signature signature{};
  signature.struct_size = sizeof signature;
  status = internal::CallPlugin(
      describe, [&] { return extension->signature(program->program_, &signature); });
  if (status != CHORUS_OK) ThrowPlugin(first, status, "the signature of a compiled program");
  program->argument_bytes_.assign(signature.argument_bytes,
                                  signature.argument_bytes + signature.num_arguments);
  program->result_bytes_.assign(signature.result_bytes,
                                signature.result_bytes + signature.num_results);
  return program;
}

DeviceProgram::~DeviceProgram() {
  if (program_ != nullptr) extension_->destroy(program_);
}

void DeviceProgram::Execute(const std::vector<std::vector<void*>>& arguments,
                            const std::vector<std::vector<void*>>& results,
                            std::chrono::milliseconds timeout) const {
  const size_t n = replicas_.size();
  if (arguments.size() != n || results.size() != n) {
    throw Error(CHORUS_INVALID_ARGUMENT,
                "DeviceProgram: " + std::to_string(arguments.size()) + " replicas' arguments and " +
                    std::to_string(results.size()) + " replicas' results for a program of " +
                    std::to_string(n) + " replicas");
  }
  std::vector<void*> flat_arguments, flat_results;
  for (size_t r = 0; r < n; ++r) {
    if (arguments[r].size() != argument_bytes_.size() ||
        results[r].size() != result_bytes_.size()) {
      throw Error(CHORUS_INVALID_ARGUMENT,
                  "DeviceProgram: replica " + std::to_string(r) + " has " +
                      std::to_string(arguments[r].size()) + " arguments and " +
                      std::to_string(results[r].size()) + " results; the program takes " +
                      std::to_string(argument_bytes_.size()) + " and gives " +
                      std::to_string(result_bytes_.size()));
    }
    flat_arguments.insert(flat_arguments.end(), arguments[r].begin(), arguments[r].end());
    flat_results.insert(flat_results.end(), results[r].begin(), results[r].end());
  }
  chorus_program_execute_args args{};
  args.struct_size = sizeof args;
  args.program = program_;
  args.arguments = flat_arguments.data();
  args.num_arguments = argument_bytes_.size();
  args.results = flat_results.data();
  args.num_results = result_bytes_.size();
  args.timeout_ms = timeout.count();
  const Device& first = replicas_.front();
  const chorus_status status = internal::CallPlugin(
      [&] { return internal::PluginWords(first.enumerator->library()) + ": its program execute"; },
      [&] { return extension_->execute(first.enumerator->context(), &args); });
  if (status != CHORUS_OK) ThrowPlugin(first, status, "running a compiled program");
}

}  // namespace chorus
