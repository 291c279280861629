// The check every plugin candidate passes before dlopen sees it. dlopen maps a shared object's
// segments where its headers say they are; a segment past the end of a truncated file is mapped
// all the same, and the dynamic linker's first read of it kills the process with SIGBUS. So the
// headers are read here, with bounded reads and no mapping, and a file they do not describe is
// rejected with a reason instead.
#ifndef CHORUS_CORE_SHARED_OBJECT_CHECK_H_
#define CHORUS_CORE_SHARED_OBJECT_CHECK_H_

#include <string>

namespace chorus::internal {

// "" when `path` is a readable regular file holding an ELF shared object (ET_DYN) of this
// process's class, byte order and machine whose ELF header, program headers, section headers
// and sections, and every loadable and dynamic segment lie inside the file. Otherwise a sentence
// that names the file, what is wrong with it and the fix.
std::string CheckSharedObject(const std::string& path);

}  // namespace chorus::internal

#endif  // CHORUS_CORE_SHARED_OBJECT_CHECK_H_
