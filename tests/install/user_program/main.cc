// Four replicas all-reduce their ids with MirroredStrategy: what a trainer writes against an
// installed chorus. Prints the cross-device ops chosen and the sum; exits 1 on a wrong sum.
#include <chorus/chorus.h>

#include <iostream>

int main() {
  try {
    chorus::MirroredStrategy strategy;  // CHORUS_CPU_DEVICES=4: four cpu replicas
    bool right = true;
    strategy.run([&](chorus::ReplicaContext& ctx) {
      const float id = static_cast<float>(ctx.replica_id_in_sync_group());
      const chorus::Tensor mine = chorus::Tensor::FromVector(ctx.device(), {2}, {id, 1});
      const auto sum = ctx.all_reduce(CHORUS_REDUCE_SUM, mine).ToVector();
      const float replicas = static_cast<float>(ctx.num_replicas_in_sync());
      if (sum[0] != replicas * (replicas - 1) / 2 || sum[1] != replicas) right = false;
    });
    std::cout << "user program: " << strategy.num_replicas_in_sync()
              << " replicas, cross-device ops " << strategy.cross_device_ops().name() << ", sum "
              << (right ? "right" : "WRONG") << "\n";
    return right ? 0 : 1;
  } catch (const chorus::Error& e) {
    std::cerr << "user program: " << chorus::StatusName(e.status()) << ": " << e.what() << "\n";
    return 2;
  }
}
