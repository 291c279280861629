// What Gloo's exceptions mean to chorus: a status and a message that quotes Gloo's own.
#ifndef CHORUS_PLUGINS_GLOO_GLOO_ERRORS_H_
#define CHORUS_PLUGINS_GLOO_GLOO_ERRORS_H_

#include <chorus/plugin.h>

#include <chorus/plugin_sdk.hpp>
#include <string>
#include <string_view>

namespace chorus::gloo_plugin {

// The status a Gloo failure message implies: CHORUS_TIMEOUT when it says it timed out ("Timed out
// waiting 500ms for recv operation", "Read timeout"), CHORUS_PEER_LOST when the connection to a
// peer was closed or reset ("Connection closed by peer", "Connection reset by peer", "Broken
// pipe", "Connection refused"), else CHORUS_INTERNAL.
chorus_status StatusOfGlooMessage(std::string_view message);

// `gloo_message` with the ports of the addresses it quotes ("[127.0.0.1]:16540") in host byte
// order ("[127.0.0.1]:40000"): this Gloo's Address::str() prints them as stored, in network byte
// order, so its messages name ports no process uses.
std::string WithHostOrderPorts(std::string_view gloo_message);

// The chorus message for a Gloo failure of that status (quoting `gloo_message` with
// WithHostOrderPorts); `what` names the call, e.g.
// "gloo all_reduce (rank 1 of 4)".
std::string DescribeGlooFailure(chorus_status status, std::string_view what,
                                std::string_view gloo_message, int64_t timeout_ms);

// Call inside a catch block: the exception in flight as sdk::Error. An sdk::Error (from the store
// adapter or the plugin's own checks) keeps its status and gets `what` in front;
// gloo::InvalidOperationException is CHORUS_INVALID_ARGUMENT (Gloo refused the call);
// std::bad_alloc is CHORUS_OUT_OF_MEMORY; any other exception is classified by its message
// (StatusOfGlooMessage).
sdk::Error TranslateCurrentException(std::string_view what, int64_t timeout_ms);

}  // namespace chorus::gloo_plugin

#endif  // CHORUS_PLUGINS_GLOO_GLOO_ERRORS_H_
