// chorus::Error and StatusName, which the core shares with the SDK (chorus/error.hpp): every
// failure of the core's C++ API is a chorus::Error carrying the chorus_status of the failure, so
// callers can tell a time-out or a lost peer from a bad argument.
#ifndef CHORUS_BASE_ERROR_H_
#define CHORUS_BASE_ERROR_H_

#include <chorus/error.hpp>

#endif  // CHORUS_BASE_ERROR_H_
