// A program compiled for devices that run whole programs (the device programs extension of the
// SDK guide, section 10: a PJRT plugin's TPUs and GPUs), run as one dispatch over every replica.
#ifndef CHORUS_DEVICE_PROGRAM_H_
#define CHORUS_DEVICE_PROGRAM_H_

#include <chorus/runtime/device.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace chorus {

class DeviceProgram {
 public:
  // Compiles `code` ("stablehlo": MLIR text whose public @main is one replica's step) for the
  // replicas (replica r on replicas[r], every device of one enumerator), to run `steps` times per
  // Execute with @main's first `num_carried` arguments carried from step to step (the ABI's
  // chorus_program_compile_args). Throws Error(UNSUPPORTED) when the devices' plugin offers no
  // programs, and the plugin's error (with its compiler's words) when it refuses the program.
  static std::unique_ptr<DeviceProgram> Compile(const std::vector<Device>& replicas,
                                                std::string_view format, std::string_view code,
                                                uint32_t steps, uint32_t num_carried);
  ~DeviceProgram();
  DeviceProgram(const DeviceProgram&) = delete;
  DeviceProgram& operator=(const DeviceProgram&) = delete;

  const std::vector<Device>& replicas() const { return replicas_; }
  // The bytes of a replica's arguments (carried, then each step's inputs) and results (carried,
  // then each step's outputs).
  const std::vector<uint64_t>& argument_bytes() const { return argument_bytes_; }
  const std::vector<uint64_t>& result_bytes() const { return result_bytes_; }

  // Runs every replica's steps: arguments[r] and results[r] are replica r's device buffers,
  // each the whole of an allocation on its device (a result may be an argument's allocation).
  // Throws Error(INVALID_ARGUMENT) for a count or a replica that differs, and the plugin's error
  // when a run fails or outlasts `timeout`.
  void Execute(const std::vector<std::vector<void*>>& arguments,
               const std::vector<std::vector<void*>>& results,
               std::chrono::milliseconds timeout) const;

 private:
  DeviceProgram() = default;
  std::vector<Device> replicas_;
  const chorus_device_programs_extension* extension_ = nullptr;
  chorus_device_program* program_ = nullptr;
  std::vector<uint64_t> argument_bytes_;
  std::vector<uint64_t> result_bytes_;
};

}  // namespace chorus

#endif  // CHORUS_DEVICE_PROGRAM_H_
