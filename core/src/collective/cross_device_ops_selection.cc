#include <chorus/base/environment.h>
#include <chorus/base/error.h>
#include <chorus/collective/cross_device_ops.h>
#include <chorus/collective/selection.h>

#include <algorithm>

namespace chorus {
namespace {

constexpr uint32_t kLocalOps = CHORUS_OP_BIT(CHORUS_OP_ALL_REDUCE) |
                               CHORUS_OP_BIT(CHORUS_OP_BROADCAST) |
                               CHORUS_OP_BIT(CHORUS_OP_ALL_GATHER);

}  // namespace

JobShape LocalShape(const std::vector<Device>& devices) {
  JobShape shape;
  shape.ranks = static_cast<int>(devices.size());
  shape.hosts = 1;
  shape.ranks_per_host = shape.ranks;
  shape.memory = devices.empty() ? "host" : devices.front().enumerator->platform();
  return shape;
}

CrossDeviceOpsSelection SelectCrossDeviceOps(const Registry& registry,
                                             std::string_view constructor_arg,
                                             const std::vector<Device>& devices) {
  if (!constructor_arg.empty()) {
    const auto entry =
        registry.FindCrossDeviceOps(constructor_arg, "the cross_device_ops argument");
    return {entry.api->name, "constructor argument", {entry.api->name}};
  }
  if (auto name = GetEnv("CHORUS_CROSS_DEVICE_OPS")) {
    const auto entry = registry.FindCrossDeviceOps(*name, "CHORUS_CROSS_DEVICE_OPS");
    return {entry.api->name, "CHORUS_CROSS_DEVICE_OPS", {entry.api->name}};
  }
  const JobShape shape = LocalShape(devices);
  const auto ranked = RankCrossDeviceOps(
      registry,
      ScoreArgs(CHORUS_OP_ALL_REDUCE, CHORUS_F32, uint64_t{1} << 20, shape, CHORUS_REQUEST_AUTO));
  if (ranked.empty() || ranked.front().score.value == 0) {
    std::string why;
    for (const auto& r : ranked) why += "; " + r.name + " " + r.score.reason;
    throw Error(CHORUS_UNSUPPORTED, "no loaded cross-device ops serve " + shape.Describe() + why);
  }
  CrossDeviceOpsSelection selection;
  selection.name = ranked.front().name;
  std::string scores;
  for (const auto& r : ranked) {
    if (r.score.value > 0) scores += (scores.empty() ? "" : ", ") + r.name + " " + r.score.Text();
  }
  selection.source = "AUTO: " + selection.name + " scores " + ranked.front().score.Text() +
                     " for " + shape.Describe() + " (best of: " + scores + ")";
  selection.names.push_back(selection.name);
  for (const GridPoint& point : SelectionGrid(kLocalOps)) {
    const auto best = RankCrossDeviceOps(
        registry, ScoreArgs(point.op, point.dtype, point.bytes, shape, CHORUS_REQUEST_AUTO));
    if (!best.empty() && best.front().score.value > 0 &&
        std::find(selection.names.begin(), selection.names.end(), best.front().name) ==
            selection.names.end()) {
      selection.names.push_back(best.front().name);
    }
  }
  return selection;
}

}  // namespace chorus
