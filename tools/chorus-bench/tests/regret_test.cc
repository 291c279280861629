// AUTO's regret from chorus-bench's rows: AUTO's time against the fastest other backend's per
// operation and size, the rows where AUTO ran that very collective (noise), and the worst.
#include <gtest/gtest.h>

#include "auto_backend.h"

namespace chorus::bench {
namespace {

Measurement Row(const std::string& backend, uint64_t bytes, double time_us, bool in_place = false,
                uint64_t wrong = 0) {
  Measurement m;
  m.backend = backend;
  m.bytes = bytes;
  m.time_us = time_us;
  m.in_place = in_place;
  m.wrong = wrong;
  return m;
}

TEST(Regret, AutoAgainstTheFastestOtherOutOfPlace) {
  const std::vector<Measurement> rows = {
      Row("auto", 4096, 2.0),
      Row("shm", 4096, 2.2),
      Row("gloo", 4096, 300),
      Row("auto", 4096, 1.0, true),  // in place: not what decides
      Row("auto", 1 << 20, 300),
      Row("shm", 1 << 20, 290),
      Row("ring@ucx", 1 << 20, 200),
      Row("ring@ucx", 1 << 20, 100, false, 5),  // wrong results never count as the fastest
  };
  const auto regret = RegretRows(rows, [](CollectiveKind, uint64_t) { return std::string("shm"); });
  ASSERT_EQ(regret.size(), 2u);
  EXPECT_EQ(regret[0].fastest, "shm");
  EXPECT_NEAR(regret[0].regret(), 2.0 / 2.2, 1e-9);
  EXPECT_EQ(regret[1].fastest, "ring@ucx");
  EXPECT_NEAR(regret[1].regret(), 1.5, 1e-9);
  const std::string table = RegretTable(regret);
  EXPECT_NE(table.find("(same)"), std::string::npos) << table;
  EXPECT_NE(table.find("AUTO ran the fastest collective at 1 size(s) (its regret there, "
                       "0.91-0.91"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("# worst regret of all_reduce: 1.50 at 1M (AUTO ran shm, ring@ucx was "
                       "faster)"),
            std::string::npos)
      << table;
  EXPECT_EQ(RegretCsv(regret),
            "op,bytes,auto_runs_on,auto_us,fastest,fastest_us,regret\n"
            "all_reduce,4096,shm,2.000,shm,2.200,0.9091\n"
            "all_reduce,1048576,shm,300.000,ring@ucx,200.000,1.5000\n");
}

TEST(Regret, NoneWhereAutoRanTheFastestEverywhere) {
  const auto regret = RegretRows({Row("auto", 64, 1.0), Row("core_ring", 64, 1.1)},
                                 [](CollectiveKind, uint64_t) { return std::string("core_ring"); });
  EXPECT_NE(RegretTable(regret).find("none (AUTO ran the fastest collective at every size)"),
            std::string::npos);
}

}  // namespace
}  // namespace chorus::bench
