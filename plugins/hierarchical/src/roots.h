// Which devices act as roots in one hierarchical all-reduce. Pure, header-only.
#ifndef CHORUS_PLUGINS_HIERARCHICAL_ROOTS_H_
#define CHORUS_PLUGINS_HIERARCHICAL_ROOTS_H_

#include <cstddef>

namespace chorus::hierarchical {

// The n replica devices split into half A = [0, half) and half B = [half, n), half = n / 2.
// The index-th all-reduce of a batch uses A[index % |A|] and B[index % |B|] as roots, so
// consecutive tensors (or packs) spread the reduction work over the devices. For n == 1, A is
// empty and the one device is root_b.
//
// We differ from TensorFlow for odd n: TF slices both groups as n / 2 devices, so the last
// device's value never enters the sum (it still receives the result), a silently wrong
// all-reduce. Here half B takes the extra device so that every device contributes; for even n
// the root pairs are the ones TF picks.
struct Roots {
  size_t half = 0;    // first position of half B
  size_t root_a = 0;  // position of A's root; meaningless when half == 0
  size_t root_b = 0;  // position of B's root
};

inline Roots ChooseRoots(size_t n, size_t index) {
  Roots roots;
  roots.half = n / 2;
  if (roots.half > 0) roots.root_a = index % roots.half;
  roots.root_b = roots.half + index % (n - roots.half);
  return roots;
}

}  // namespace chorus::hierarchical

#endif  // CHORUS_PLUGINS_HIERARCHICAL_ROOTS_H_
