// Tensors: views share their storage at an offset; every copy in and out honours the offset.
#include <chorus/base/error.h>
#include <chorus/runtime/tensor.h>
#include <gtest/gtest.h>

#include <vector>

#include "cpu_devices_for_tests.h"

namespace chorus {
namespace {

using test::CpuDevices;
using test::ExpectMessage;

TEST(Tensor, AViewSharesTheStorageFromItsFirstElement) {
  const std::vector<Device> devices = CpuDevices(2);
  const Tensor whole = Tensor::FromVector(devices[0], {6}, {0, 1, 2, 3, 4, 5});
  const Tensor view = whole.View(2, {2, 1});
  EXPECT_EQ(view.shape(), (Shape{2, 1}));
  EXPECT_EQ(view.raw(), static_cast<char*>(whole.raw()) + 2 * sizeof(float));
  EXPECT_EQ(view.ToVector(), (std::vector<float>{2, 3}));
  // Writes through the view show in the whole, and the other way round.
  const std::vector<float> nine = {9, 9};
  view.CopyFromHost(nine.data());
  EXPECT_EQ(whole.ToVector(), (std::vector<float>{0, 1, 9, 9, 4, 5}));
  whole.data<float>()[3] = 7;
  EXPECT_EQ(view.data<float>()[1], 7);
  // A view of a view, copies and assignments of views.
  const Tensor inner = whole.View(1, {4}).View(3, {1});
  EXPECT_EQ(inner.ToVector(), std::vector<float>{4});
  EXPECT_EQ(view.CopyTo(devices[1]).ToVector(), (std::vector<float>{9, 7}));
  EXPECT_NE(view.Clone().raw(), view.raw());  // a copy, not a view
  inner.Assign(Tensor::FromVector(devices[1], {1}, {8}));
  EXPECT_EQ(whole.ToVector(), (std::vector<float>{0, 1, 9, 7, 8, 5}));
  EXPECT_EQ(view.Reshaped({2}).ToVector(), (std::vector<float>{9, 7}));
  // Empty views, at the end too.
  EXPECT_EQ(whole.View(6, {0}).num_elements(), 0);
}

TEST(Tensor, AViewPastTheEndIsAnError) {
  const Tensor whole = Tensor::FromVector(CpuDevices(1)[0], {3}, {1, 2, 3});
  ExpectMessage([&] { whole.View(2, {2}); }, "cannot view 2 elements from element 2");
  ExpectMessage([&] { whole.View(-1, {1}); }, "cannot view 1 elements from element -1");
  ExpectMessage([&] { whole.View(4, {0}); }, "of a tensor of [3]");
}

}  // namespace
}  // namespace chorus
