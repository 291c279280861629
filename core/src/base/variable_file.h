// Reading the file a variable names (CHORUS_TUNING_FILE=/path), with errors that say which
// variable, which path and what is wrong with it.
#ifndef CHORUS_BASE_VARIABLE_FILE_H_
#define CHORUS_BASE_VARIABLE_FILE_H_

#include <string>

namespace chorus {

// The whole content of `path`, which the variable `variable` names. Throws
// Error(INVALID_ARGUMENT) "<variable>=<path> is a directory, not a file; <fix>" for a directory
// (which a stream would read as an empty file), and "<variable>=<path> cannot be read: <the
// system's reason>; <fix>" for a path that does not exist or cannot be opened or read.
std::string ReadVariableFile(const std::string& variable, const std::string& path,
                             const std::string& fix);

}  // namespace chorus

#endif  // CHORUS_BASE_VARIABLE_FILE_H_
