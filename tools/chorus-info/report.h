// The text chorus-info prints: plugins, devices, selections and rejected candidates.
#ifndef CHORUS_TOOLS_INFO_REPORT_H_
#define CHORUS_TOOLS_INFO_REPORT_H_

#include <chorus/runtime/registry.h>

#include <ostream>

namespace chorus::info {

void PrintSearchPath(const Registry& registry, std::ostream& out);
void PrintPlugins(const Registry& registry, std::ostream& out);
void PrintDevices(const Registry& registry, std::ostream& out);
void PrintSelection(const Registry& registry, std::ostream& out);
void PrintRejected(const Registry& registry, std::ostream& out);

}  // namespace chorus::info

#endif  // CHORUS_TOOLS_INFO_REPORT_H_
