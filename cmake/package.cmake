# The installable part of mlc-manifest (included from CMakeLists.txt):
# - libmlc_manifest.so.1: the C API of include/mlc_manifest/mlc_manifest.h (src/capi/) over the
#   static library, exporting the mlc_* functions and nothing else (src/capi/exports.map);
# - the Python module mlc_manifest (python/, pybind11), not in sanitizer builds;
# - cmake --install rules: headers, the library, the modules (image, audio, resampler, HTTP,
#   crypto, SentencePiece), the CLI, the CMake package
#   (find_package(mlc_manifest CONFIG) -> mlc_manifest::mlc_manifest), mlc-manifest.pc;
# - the tests of all that (exported symbols, pytest, an install and two external programs).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(MLC_SOVERSION 1)  # the C ABI's version: bump on an incompatible change
set(MLC_MODULE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/mlc_manifest)
target_compile_definitions(mlc_manifest PRIVATE
    MLC_MODULE_INSTALL_DIR="${CMAKE_INSTALL_FULL_LIBDIR}/mlc_manifest")

# ---- the shared library ----
file(GLOB MLC_CAPI_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/capi/*.cc)
add_library(mlc_manifest_shared SHARED ${MLC_CAPI_SOURCES})
set_target_properties(mlc_manifest_shared PROPERTIES
    OUTPUT_NAME mlc_manifest EXPORT_NAME mlc_manifest
    VERSION ${PROJECT_VERSION} SOVERSION ${MLC_SOVERSION}
    CXX_VISIBILITY_PRESET hidden C_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON
    LINK_DEPENDS ${PROJECT_SOURCE_DIR}/src/capi/exports.map)
target_compile_definitions(mlc_manifest_shared PRIVATE MLC_MANIFEST_BUILDING)
target_compile_options(mlc_manifest_shared PRIVATE ${MLC_WARNINGS})
target_include_directories(mlc_manifest_shared
    PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
           $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>
           $<BUILD_INTERFACE:${DLPACK_INCLUDE_DIR}>
           $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
    PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(mlc_manifest_shared PRIVATE mlc_manifest mlc_manifest_reference)
target_link_options(mlc_manifest_shared PRIVATE
    -Wl,--version-script=${PROJECT_SOURCE_DIR}/src/capi/exports.map)
if(NOT MLC_SANITIZE AND NOT MLC_FUZZ)
  target_link_options(mlc_manifest_shared PRIVATE -Wl,--no-undefined)
endif()

# ---- the Python module (a sanitizer runtime cannot be loaded into /usr/bin/python3) ----
set(MLC_PYTHON_DIR ${PROJECT_BINARY_DIR}/python)
set(MLC_PYTHON_INSTALL_DIR lib/python3/dist-packages CACHE STRING
    "Where cmake --install puts the Python package (relative to the prefix)")
if(NOT MLC_SANITIZE AND NOT MLC_FUZZ)
  set(Python_EXECUTABLE /usr/bin/python3 CACHE FILEPATH "The Python the module is built for")
  set(PYBIND11_FINDPYTHON ON)
  find_package(pybind11 CONFIG QUIET)
endif()
file(GLOB MLC_PY_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/python/src/*.cc)
if(pybind11_FOUND AND MLC_PY_SOURCES)
  # The C API is compiled in as well: prompt, plan and sessions go through it.
  pybind11_add_module(mlc_manifest_python ${MLC_PY_SOURCES} ${MLC_CAPI_SOURCES})
  set_target_properties(mlc_manifest_python PROPERTIES OUTPUT_NAME _core
      LIBRARY_OUTPUT_DIRECTORY ${MLC_PYTHON_DIR}/mlc_manifest)
  target_include_directories(mlc_manifest_python PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(mlc_manifest_python PRIVATE ${MLC_WARNINGS})
  target_link_libraries(mlc_manifest_python PRIVATE mlc_manifest mlc_manifest_reference)
  configure_file(${PROJECT_SOURCE_DIR}/python/mlc_manifest/__init__.py
                 ${MLC_PYTHON_DIR}/mlc_manifest/__init__.py COPYONLY)
  install(TARGETS mlc_manifest_python LIBRARY DESTINATION ${MLC_PYTHON_INSTALL_DIR}/mlc_manifest
          COMPONENT python)
  install(FILES ${PROJECT_SOURCE_DIR}/python/mlc_manifest/__init__.py
          DESTINATION ${MLC_PYTHON_INSTALL_DIR}/mlc_manifest COMPONENT python)
  # The modules are found beside the code that loads them: relative links from the package
  # folder to the installed modules, so an unpacked or relocated tree works too.
  foreach(module ${MLC_MODULE_TARGETS})
    file(RELATIVE_PATH MLC_PY_TO_MODULE /${MLC_PYTHON_INSTALL_DIR}/mlc_manifest
         /${MLC_MODULE_INSTALL_DIR}/lib${module}.so)
    install(CODE "file(CREATE_LINK ${MLC_PY_TO_MODULE}
        \$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${MLC_PYTHON_INSTALL_DIR}/mlc_manifest/lib${module}.so
        SYMBOLIC)" COMPONENT python)
  endforeach()
endif()

# ---- install ----
install(TARGETS mlc_manifest_shared EXPORT mlc_manifestTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT lib NAMELINK_COMPONENT dev)
# The modules the library opens on demand (cmake/modules.cmake), installed together.
install(TARGETS ${MLC_MODULE_TARGETS} LIBRARY DESTINATION ${MLC_MODULE_INSTALL_DIR} COMPONENT lib)
install(TARGETS mlc-manifest RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cli)
install(FILES ${PROJECT_SOURCE_DIR}/include/mlc_manifest/mlc_manifest.h
              ${PROJECT_BINARY_DIR}/include/mlc_manifest/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mlc_manifest COMPONENT dev)
set(MLC_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/mlc_manifest)
install(EXPORT mlc_manifestTargets NAMESPACE mlc_manifest:: DESTINATION ${MLC_CMAKE_DIR}
        COMPONENT dev)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/mlc_manifestConfig.cmake.in
    ${PROJECT_BINARY_DIR}/mlc_manifestConfig.cmake INSTALL_DESTINATION ${MLC_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/mlc_manifestConfigVersion.cmake
    COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/mlc_manifestConfig.cmake
              ${PROJECT_BINARY_DIR}/mlc_manifestConfigVersion.cmake
        DESTINATION ${MLC_CMAKE_DIR} COMPONENT dev)
# pkg-config: the prefix relative to the .pc file, so an unpacked or relocated tree works too.
set(MLC_PC_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
file(RELATIVE_PATH MLC_PC_TO_PREFIX /${MLC_PC_DIR} /)
configure_file(${PROJECT_SOURCE_DIR}/cmake/mlc-manifest.pc.in
               ${PROJECT_BINARY_DIR}/mlc-manifest.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/mlc-manifest.pc DESTINATION ${MLC_PC_DIR} COMPONENT dev)

# ---- tests ----
if(MLC_TESTS)
  add_test(NAME capi_exported_symbols
           COMMAND ${PROJECT_SOURCE_DIR}/tests/capi/check_symbols.sh
                   $<TARGET_FILE:mlc_manifest_shared> ${PROJECT_SOURCE_DIR}/tests/capi/symbols.txt)
  foreach(test_with_c_api capi_test long_audio_test)
    if(TARGET ${test_with_c_api})
      target_link_libraries(${test_with_c_api} PRIVATE mlc_manifest_shared)
    endif()
  endforeach()
  if(NOT MLC_SANITIZE AND NOT MLC_FUZZ)
    add_test(NAME install_external_programs
             COMMAND ${PROJECT_SOURCE_DIR}/tests/capi/install_test.sh ${PROJECT_BINARY_DIR}
                     ${PROJECT_SOURCE_DIR})
    set_tests_properties(install_external_programs PROPERTIES TIMEOUT 600)
  endif()
  if(TARGET mlc_manifest_python)
    add_test(NAME python_pytest
             COMMAND /usr/bin/python3 -m pytest -q -p no:cacheprovider ${PROJECT_SOURCE_DIR}/python/tests)
    set_tests_properties(python_pytest PROPERTIES
        ENVIRONMENT "PYTHONPATH=${MLC_PYTHON_DIR};MLC_SOURCE_DIR=${PROJECT_SOURCE_DIR};MLC_SHARED_DIR=${MLC_SHARED_DIR};MLC_CLI_PATH=$<TARGET_FILE:mlc-manifest>"
        TIMEOUT 600)
  endif()
endif()
