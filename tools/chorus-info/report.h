// The text chorus-info prints: plugins, devices, selections and rejected candidates.
#ifndef CHORUS_TOOLS_INFO_REPORT_H_
#define CHORUS_TOOLS_INFO_REPORT_H_

#include <chorus/runtime/registry.h>

#include <ostream>
#include <string>
#include <vector>

namespace chorus::info {

void PrintSearchPath(const Registry& registry, std::ostream& out);
void PrintPlugins(const Registry& registry, std::ostream& out);
void PrintDevices(const Registry& registry, std::ostream& out);
void PrintRejected(const Registry& registry, std::ostream& out);

// The job chorus-info describes the collectives' selection for.
struct JobDescription {
  int workers = 2;
  int hosts = 1;
  std::string implementation = "AUTO";  // as CommunicationOptions.implementation: AUTO, RING, NCCL
};

// What the variables (CHORUS_CROSS_DEVICE_OPS, CHORUS_COMMUNICATION, CHORUS_ALGORITHM,
// CHORUS_TUNING_FILE) select: the cross-device ops of the default devices and the collective of
// the job, each with why. Returns the errors of variables that select nothing usable (an unknown
// name, with the names there are); chorus-info then exits 2.
std::vector<std::string> PrintSelection(const Registry& registry, const JobDescription& job,
                                        std::ostream& out);
// Every collective's and cross-device ops' score per operation and size for the job's shape (and
// the default devices), the choice for each and why it won (a variable, the tuning file, the
// best score).
void PrintScores(const Registry& registry, const JobDescription& job, std::ostream& out);

}  // namespace chorus::info

#endif  // CHORUS_TOOLS_INFO_REPORT_H_
