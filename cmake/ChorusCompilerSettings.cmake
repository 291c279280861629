# Warnings and sanitizers for chorus's own targets.

function(chorus_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic)
  if(CHORUS_WARNINGS_AS_ERRORS)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

if(CHORUS_SANITIZE)
  if(NOT CHORUS_SANITIZE MATCHES "^(address|undefined|thread)(,(address|undefined|thread))*$")
    message(FATAL_ERROR "CHORUS_SANITIZE='${CHORUS_SANITIZE}': use 'address,undefined' or 'thread'")
  endif()
  add_compile_options(-fsanitize=${CHORUS_SANITIZE} -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${CHORUS_SANITIZE})
  if(CHORUS_SANITIZE MATCHES "undefined")
    add_compile_options(-fno-sanitize-recover=undefined)
  endif()
endif()
