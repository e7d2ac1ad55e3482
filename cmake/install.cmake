# `cmake --install <build> [--prefix P]`: the scaleplan binary in P/bin, the bundled data in
# P/share/scaleplan with the relative paths the code reads (core/data_dir.h finds it beside the
# executable, <bindir>/../share/scaleplan), and the shell completions where bash-completion and
# zsh look for them. GNUInstallDirs (included by the top CMakeLists.txt) names the folders.
# The Python wheel (scikit-build-core defines SKBUILD) installs the binary and the same data layout
# itself, into the environment's scripts and data folders (python/CMakeLists.txt).
if(DEFINED SKBUILD)
  return()
endif()
set(scaleplan_data_dest ${CMAKE_INSTALL_DATADIR}/scaleplan)
install(TARGETS scaleplan RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The runtime's loadable modules (runtime/modules.h: opened with dlopen when a command needs the
# cuda backend or MPI); the loader looks in <bindir>/../lib and in this lib dir.
foreach(module scaleplan_cuda scaleplan_mpi)
  if(TARGET ${module})
    install(TARGETS ${module} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  endif()
endforeach()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/models/presets/
  DESTINATION ${scaleplan_data_dest}/models/presets)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/hw_profiles/bundled/
  DESTINATION ${scaleplan_data_dest}/hw_profiles/bundled)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/export/frameworks/
  DESTINATION ${scaleplan_data_dest}/export/frameworks)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/validation/
  DESTINATION ${scaleplan_data_dest}/validation)

# The completion scripts, generated from the command line by the built binary (`scaleplan
# completion bash|zsh`, cli/cmd_completion.cc) with the names of the bundled presets, profiles and
# validation sets. A cross-compiled binary cannot run here: README.md has the one-liners that
# generate them on the target instead. Sanitizer builds (the `sanitize` and `tsan` presets) are
# never installed and skip them, so that their build does not depend on the instrumented binary.
if(NOT CMAKE_CROSSCOMPILING AND SCALEPLAN_SANITIZER STREQUAL "" AND NOT SCALEPLAN_BUILD_FUZZ)
  set(scaleplan_completion_dir ${PROJECT_BINARY_DIR}/completions)
  file(GLOB scaleplan_completion_data CONFIGURE_DEPENDS
    ${PROJECT_SOURCE_DIR}/models/presets/*.json ${PROJECT_SOURCE_DIR}/hw_profiles/bundled/*.json
    ${PROJECT_SOURCE_DIR}/validation/*.json)
  add_custom_command(
    OUTPUT ${scaleplan_completion_dir}/scaleplan ${scaleplan_completion_dir}/_scaleplan
    COMMAND ${CMAKE_COMMAND} -E make_directory ${scaleplan_completion_dir}
    COMMAND ${CMAKE_COMMAND} -E env SCALEPLAN_DATA_DIR=${PROJECT_SOURCE_DIR}
      $<TARGET_FILE:scaleplan> completion bash --out ${scaleplan_completion_dir}/scaleplan
    COMMAND ${CMAKE_COMMAND} -E env SCALEPLAN_DATA_DIR=${PROJECT_SOURCE_DIR}
      $<TARGET_FILE:scaleplan> completion zsh --out ${scaleplan_completion_dir}/_scaleplan
    DEPENDS scaleplan ${scaleplan_completion_data}
    COMMENT "scaleplan: bash and zsh completion scripts"
    VERBATIM)
  add_custom_target(scaleplan_completions ALL
    DEPENDS ${scaleplan_completion_dir}/scaleplan ${scaleplan_completion_dir}/_scaleplan)
  install(FILES ${scaleplan_completion_dir}/scaleplan
    DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions)
  install(FILES ${scaleplan_completion_dir}/_scaleplan
    DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/site-functions)
endif()
