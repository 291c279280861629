// The rendezvous stores' common contract: the in-process, file and TCP stores pass the same tests
// (waits, time-outs, add, check and remove, binary values, prefixes, the C table).
#include "store_test_support.h"

namespace chorus {
namespace {

enum class StoreKind { kInProcess, kFile, kTcp };

std::string KindName(const ::testing::TestParamInfo<StoreKind>& info) {
  switch (info.param) {
    case StoreKind::kInProcess:
      return "InProcess";
    case StoreKind::kFile:
      return "File";
    case StoreKind::kTcp:
      return "Tcp";
  }
  return "Unknown";
}

class KvStoreTest : public ::testing::TestWithParam<StoreKind> {
 protected:
  void SetUp() override {
    if (GetParam() == StoreKind::kInProcess) in_process_ = MakeInProcessStore();
    if (GetParam() == StoreKind::kTcp) server_ = TcpStoreServer::Start("127.0.0.1", 0);
    store_ = Connect();
  }

  // Another worker's view of the same store: a new connection or file store object, or (for the
  // in-process store) the same object.
  std::shared_ptr<KvStore> Connect() {
    switch (GetParam()) {
      case StoreKind::kInProcess:
        return in_process_;
      case StoreKind::kFile:
        return MakeFileStore(directory_.path());
      case StoreKind::kTcp:
        return ConnectTcpStore("127.0.0.1", server_->port(), 5s);
    }
    return nullptr;
  }

  TempDirectory directory_;
  std::shared_ptr<KvStore> in_process_;
  std::unique_ptr<TcpStoreServer> server_;
  std::shared_ptr<KvStore> store_;
};

INSTANTIATE_TEST_SUITE_P(Stores, KvStoreTest,
                         ::testing::Values(StoreKind::kInProcess, StoreKind::kFile,
                                           StoreKind::kTcp),
                         KindName);

TEST_P(KvStoreTest, SetThenGet) {
  store_->Set("greeting", ToBytes("hello"));
  EXPECT_EQ(ToString(store_->Get("greeting", 0ms)), "hello");
  store_->Set("greeting", ToBytes("bye"));
  EXPECT_EQ(ToString(Connect()->Get("greeting", 1s)), "bye");
  EXPECT_EQ(store_->Describe(), Connect()->Describe());
}

TEST_P(KvStoreTest, GetWaitsForALaterSetFromAnotherThread) {
  std::thread setter = Spawn([other = Connect()] {
    std::this_thread::sleep_for(100ms);
    other->Set("late", ToBytes("here"));
  });
  const auto start = Clock::now();
  EXPECT_EQ(ToString(store_->Get("late", 5s)), "here");
  EXPECT_GE(Since(start), 90ms);
  setter.join();
}

TEST_P(KvStoreTest, WaitOnSeveralKeys) {
  std::thread setter = Spawn([other = Connect()] {
    for (const char* key : {"a", "b", "c"}) {
      std::this_thread::sleep_for(30ms);
      other->Set(key, ToBytes(key));
    }
  });
  store_->Wait({"a", "b", "c"}, 5s);
  setter.join();
  EXPECT_TRUE(store_->Check("c"));
  const Error error = Thrown([&] { store_->Wait({"a", "missing"}, 50ms); });
  EXPECT_EQ(error.status(), CHORUS_TIMEOUT);
  EXPECT_NE(std::string(error.what()).find("'missing'"), std::string::npos) << error.what();
}

TEST_P(KvStoreTest, TimeoutNamesTheKeyAndTakesTheTimeout) {
  const auto start = Clock::now();
  const Error error = Thrown([&] { store_->Get("never/set", 300ms); });
  const milliseconds took = Since(start);
  EXPECT_EQ(error.status(), CHORUS_TIMEOUT);
  EXPECT_NE(std::string(error.what()).find("'never/set'"), std::string::npos) << error.what();
  EXPECT_NE(std::string(error.what()).find(store_->Describe()), std::string::npos);
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 800ms);
}

TEST_P(KvStoreTest, AddFromEightThreadsWithOwnStores) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.push_back(Spawn([store = Connect()] {
      for (int i = 0; i < 100; ++i) store->Add("counter", 1);
    }));
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(store_->Add("counter", 0), 800);
  EXPECT_EQ(ToString(store_->Get("counter", 0ms)), "800");
  EXPECT_EQ(store_->Add("counter", -801), -1);
}

TEST_P(KvStoreTest, AddFromEightThreadsSharingOneStore) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.push_back(Spawn([this] {
      for (int i = 0; i < 100; ++i) store_->Add("shared", 1);
    }));
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(store_->Add("shared", 0), 800);
}

TEST_P(KvStoreTest, AddOnANonIntegerIsRefused) {
  store_->Set("text", ToBytes("twelve"));
  EXPECT_EQ(Thrown([&] { store_->Add("text", 1); }).status(), CHORUS_INVALID_ARGUMENT);
  EXPECT_EQ(ToString(store_->Get("text", 0ms)), "twelve");
}

TEST_P(KvStoreTest, CheckAndRemove) {
  EXPECT_FALSE(store_->Check("k"));
  EXPECT_FALSE(store_->Remove("k"));
  store_->Set("k", ToBytes("v"));
  EXPECT_TRUE(Connect()->Check("k"));
  EXPECT_TRUE(store_->Remove("k"));
  EXPECT_FALSE(store_->Check("k"));
  EXPECT_EQ(Thrown([&] { store_->Get("k", 0ms); }).status(), CHORUS_TIMEOUT);
}

TEST_P(KvStoreTest, BinaryValuesAndOddKeys) {
  Bytes every_byte(512);
  for (size_t i = 0; i < every_byte.size(); ++i) every_byte[i] = static_cast<uint8_t>(i);
  const std::vector<std::string> keys = {
      "plain", "with/slash",         "../up", ".hidden", "sp ace%25", std::string("nul\0byte", 8),
      "",      std::string(300, 'x')};
  for (const std::string& key : keys) store_->Set(key, every_byte);
  store_->Set("empty", {});
  for (const std::string& key : keys) EXPECT_EQ(Connect()->Get(key, 0ms), every_byte) << key;
  EXPECT_TRUE(store_->Get("empty", 0ms).empty());
  // Distinct keys stay distinct, however they are escaped.
  store_->Set(std::string(300, 'x') + "y", ToBytes("other"));
  EXPECT_EQ(store_->Get(std::string(300, 'x'), 0ms), every_byte);
  EXPECT_FALSE(store_->Check("with%2Fslash"));
}

TEST_P(KvStoreTest, LargeValue) {
  Bytes large(1 << 20);
  std::mt19937 random(7);
  for (uint8_t& byte : large) byte = static_cast<uint8_t>(random());
  std::thread setter = Spawn([&, other = Connect()] { other->Set("large", large); });
  EXPECT_EQ(store_->Get("large", 5s), large);
  setter.join();
}

TEST_P(KvStoreTest, PrefixesIsolate) {
  const std::shared_ptr<KvStore> a = WithPrefix(store_, "a/");
  const std::shared_ptr<KvStore> b = WithPrefix(Connect(), "b/");
  a->Set("key", ToBytes("from a"));
  b->Set("key", ToBytes("from b"));
  EXPECT_EQ(ToString(a->Get("key", 0ms)), "from a");
  EXPECT_EQ(ToString(b->Get("key", 0ms)), "from b");
  EXPECT_EQ(ToString(store_->Get("a/key", 0ms)), "from a");
  EXPECT_FALSE(store_->Check("key"));
  EXPECT_EQ(a->Add("n", 2), 2);
  EXPECT_EQ(b->Add("n", 5), 5);
  EXPECT_TRUE(a->Remove("key"));
  EXPECT_TRUE(b->Check("key"));
}

TEST_P(KvStoreTest, ThroughTheCTable) {
  const CKvStore c_store(store_);
  const chorus_kv_store* table = c_store.get();
  const char value[] = "0123456789";
  ASSERT_EQ(table->set(table->ctx, "ten", value, 10), CHORUS_OK);

  char small[4] = {};
  size_t size = 0;
  ASSERT_EQ(table->get(table->ctx, "ten", 1000, small, sizeof(small), &size), CHORUS_OK);
  EXPECT_EQ(size, 10u);  // the full size, so the caller can retry with a larger buffer
  EXPECT_EQ(std::string(small, 4), "0123");
  char full[10] = {};
  ASSERT_EQ(table->get(table->ctx, "ten", 1000, full, sizeof(full), &size), CHORUS_OK);
  EXPECT_EQ(std::string(full, 10), "0123456789");

  EXPECT_EQ(table->get(table->ctx, "absent", 20, full, sizeof(full), &size), CHORUS_TIMEOUT);
  const char* keys[] = {"ten", "absent"};
  EXPECT_EQ(table->wait(table->ctx, keys, 2, 20), CHORUS_TIMEOUT);
  EXPECT_EQ(table->wait(table->ctx, keys, 1, 20), CHORUS_OK);

  int64_t result = 0;
  ASSERT_EQ(table->add(table->ctx, "n", 3, &result), CHORUS_OK);
  EXPECT_EQ(result, 3);
  int exists = 0;
  ASSERT_EQ(table->check(table->ctx, "n", &exists), CHORUS_OK);
  EXPECT_EQ(exists, 1);
  EXPECT_EQ(table->remove(table->ctx, "n"), CHORUS_OK);
  EXPECT_EQ(table->remove(table->ctx, "n"), CHORUS_NOT_FOUND);
  EXPECT_EQ(table->set(table->ctx, nullptr, value, 1), CHORUS_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace chorus
