/* Built with -std=c99 -pedantic -Wall -Wextra -Werror: plugin.h must compile as plain C99. */
#include <chorus/plugin.h>

size_t chorus_plugin_h_check(void);
size_t chorus_plugin_h_check(void) {
  chorus_plugin table;
  table.struct_size = sizeof table;
  return chorus_dtype_size(CHORUS_BF16) + (CHORUS_HAS_FIELD(&table, chorus_plugin, transport) ? 1 : 0);
}
