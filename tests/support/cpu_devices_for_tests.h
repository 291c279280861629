// Helpers shared by the strategy-level unit tests: virtual cpu devices from the core's builtin
// plugin (no plugin files are loaded), small tensors, and a check of an error's message.
#pragma once

#include <chorus/base/error.h>
#include <chorus/distribute/variable.h>
#include <chorus/runtime/device.h>
#include <chorus/runtime/registry.h>
#include <chorus/runtime/tensor.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace chorus::test {

// n virtual cpu devices of one enumerator, from a registry that loads no plugin files.
inline std::vector<Device> CpuDevices(uint32_t n) {
  static Registry registry([] {
    LoaderOptions options;
    options.filter = "none";
    return options;
  }());
  auto cpu = DeviceEnumerator::Create(registry.FindPlugin("core"), {{"count", std::to_string(n)}});
  std::vector<Device> devices;
  for (uint32_t i = 0; i < n; ++i) devices.push_back({cpu, i});
  return devices;
}

inline const Device& HostDevice() {
  static const Device device = CpuDevices(1)[0];
  return device;
}

inline Tensor Filled(const Device& device, Shape shape, float value) {
  return Tensor::FromVector(device, shape, std::vector<float>(NumElements(shape), value));
}

inline Tensor Values(const std::vector<float>& values, const Device& device = HostDevice()) {
  return Tensor::FromVector(device, {static_cast<int64_t>(values.size())}, values);
}

// A variable of `values` (shape {values.size()}) outside any strategy's scope.
inline Variable MakeVariable(const std::string& name, const std::vector<float>& values,
                             bool trainable = true) {
  VariableSpec spec;
  spec.name = name;
  spec.trainable = trainable;
  return Variable::Create(spec, {static_cast<int64_t>(values.size())}, values);
}

// fn throws a chorus::Error of `status` whose message contains every one of `parts`.
inline void ExpectError(const std::function<void()>& fn, chorus_status status,
                        const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing: " << parts.front();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), status) << e.what();
    for (const std::string& part : parts) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "'" << part << "' is not in: " << e.what();
    }
  }
}

// fn throws a chorus::Error whose message contains `part`.
inline void ExpectMessage(const std::function<void()>& fn, const std::string& part) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing: " << part;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

// Whether `text` contains `part`, showing both when it does not (gtest alone, without gmock).
inline ::testing::AssertionResult HasText(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" does not contain \"" << part << "\"";
}

// The message of the INVALID_ARGUMENT error `f` throws; a test failure when it throws none.
template <typename F>
std::string ErrorOf(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), CHORUS_INVALID_ARGUMENT);
    return e.what();
  }
  ADD_FAILURE() << "no Error thrown";
  return "";
}

}  // namespace chorus::test
