// Sets or clears an environment variable for the life of the object, then restores it.
#ifndef CHORUS_TESTS_SUPPORT_SCOPED_VARIABLE_H_
#define CHORUS_TESTS_SUPPORT_SCOPED_VARIABLE_H_

#include <cstdlib>
#include <optional>
#include <string>

namespace chorus::test {

class ScopedVariable {
 public:
  // `value` nullptr clears the variable.
  ScopedVariable(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedVariable() {
    if (old_) {
      ::setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ScopedVariable(const ScopedVariable&) = delete;
  ScopedVariable& operator=(const ScopedVariable&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace chorus::test

#endif  // CHORUS_TESTS_SUPPORT_SCOPED_VARIABLE_H_
