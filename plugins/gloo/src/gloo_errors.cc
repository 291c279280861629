#include "gloo_errors.h"

#include <arpa/inet.h>
#include <gloo/common/error.h>
#include <gloo/common/logging.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <exception>
#include <new>

namespace chorus::gloo_plugin {
namespace {

std::string Lower(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower;
}

bool ContainsAny(const std::string& text, std::initializer_list<std::string_view> needles) {
  return std::any_of(needles.begin(), needles.end(), [&](std::string_view needle) {
    return text.find(needle) != std::string::npos;
  });
}

std::string Join(std::string_view a, std::string_view b) {
  std::string joined(a);
  joined += b;
  return joined;
}

}  // namespace

chorus_status StatusOfGlooMessage(std::string_view message) {
  const std::string lower = Lower(message);
  if (ContainsAny(lower, {"timed out", "timeout"})) return CHORUS_TIMEOUT;
  if (ContainsAny(lower, {"connection closed by peer", "connection reset by peer", "broken pipe",
                          "connection refused", "socket closed"})) {
    return CHORUS_PEER_LOST;
  }
  return CHORUS_INTERNAL;
}

std::string WithHostOrderPorts(std::string_view gloo_message) {
  std::string out;
  size_t at = 0;
  for (;;) {
    const size_t mark = gloo_message.find("]:", at);
    if (mark == std::string_view::npos) break;
    const size_t digits = mark + 2;
    size_t end = digits;
    while (end < gloo_message.size() && std::isdigit(static_cast<unsigned char>(gloo_message[end])))
      ++end;
    out += gloo_message.substr(at, digits - at);
    unsigned stored = 0;
    const bool parsed =
        std::from_chars(gloo_message.data() + digits, gloo_message.data() + end, stored).ec ==
        std::errc();
    if (end > digits && parsed && stored <= 0xffff) {
      out += std::to_string(ntohs(static_cast<uint16_t>(stored)));
    } else {
      out += gloo_message.substr(digits, end - digits);
    }
    at = end;
  }
  out += gloo_message.substr(at);
  return out;
}

std::string DescribeGlooFailure(chorus_status status, std::string_view what,
                                std::string_view raw_gloo_message, int64_t timeout_ms) {
  const std::string gloo_message = WithHostOrderPorts(raw_gloo_message);
  std::string message(what);
  switch (status) {
    case CHORUS_TIMEOUT:
      message += ": timed out (the communicator's time-out is " + std::to_string(timeout_ms) +
                 " ms; is every rank issuing the same operations?): Gloo: ";
      message += gloo_message;
      break;
    case CHORUS_PEER_LOST:
      message += ": a peer closed its connection: Gloo: ";
      message += gloo_message;
      message += " (the process may have died)";
      break;
    case CHORUS_INVALID_ARGUMENT:
      message += ": Gloo refused the call: ";
      message += gloo_message;
      break;
    default:
      message += ": Gloo failed: ";
      message += gloo_message;
      break;
  }
  return message;
}

sdk::Error TranslateCurrentException(std::string_view what, int64_t timeout_ms) {
  try {
    throw;
  } catch (const sdk::Error& e) {
    return sdk::Error(e.status(), Join(what, Join(": ", e.what())));
  } catch (const ::gloo::InvalidOperationException& e) {
    return sdk::Error(CHORUS_INVALID_ARGUMENT,
                      DescribeGlooFailure(CHORUS_INVALID_ARGUMENT, what, e.what(), timeout_ms));
  } catch (const std::bad_alloc&) {
    return sdk::Error(CHORUS_OUT_OF_MEMORY, Join(what, ": out of memory"));
  } catch (const std::exception& e) {  // gloo::IoException, gloo::EnforceNotMet, ...
    const chorus_status status = StatusOfGlooMessage(e.what());
    return sdk::Error(status, DescribeGlooFailure(status, what, e.what(), timeout_ms));
  } catch (...) {
    return sdk::Error(CHORUS_INTERNAL, Join(what, ": Gloo threw an unknown exception"));
  }
}

}  // namespace chorus::gloo_plugin
