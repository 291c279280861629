// A KvStore over a chorus_kv_store (plugin.h): the reverse of CKvStore, for core code that is
// handed a store across the ABI (the host's composition service, given a plugin's sub-store) and
// hands parts of it to Communicators.
#ifndef CHORUS_CORE_RENDEZVOUS_C_KV_STORE_VIEW_H_
#define CHORUS_CORE_RENDEZVOUS_C_KV_STORE_VIEW_H_

#include <chorus/plugin.h>
#include <chorus/rendezvous/kv_store.h>

#include <memory>

namespace chorus::internal {

// `store` is borrowed and must outlive the view. Failures throw Error with the store's status.
std::shared_ptr<KvStore> ViewOfCStore(const chorus_kv_store* store);

}  // namespace chorus::internal

#endif  // CHORUS_CORE_RENDEZVOUS_C_KV_STORE_VIEW_H_
