// The message of the CHORUS_INVALID_ARGUMENT error that fn() throws; a test failure when it
// throws none (or another status).
#ifndef CHORUS_TESTS_INTEGRATION_INVALID_ARGUMENT_OF_H_
#define CHORUS_TESTS_INTEGRATION_INVALID_ARGUMENT_OF_H_

#include <chorus/base/error.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>

namespace fashion_mnist::test {

inline std::string InvalidArgumentOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const chorus::Error& e) {
    EXPECT_EQ(e.status(), CHORUS_INVALID_ARGUMENT);
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return {};
}

}  // namespace fashion_mnist::test

#endif  // CHORUS_TESTS_INTEGRATION_INVALID_ARGUMENT_OF_H_
