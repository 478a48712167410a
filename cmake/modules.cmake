# The modules (included from CMakeLists.txt): shared objects the library opens with dlopen when a
# command first needs them (src/base/module_loader.h), each exporting one plain C table, so that
# only the commands using them load libvips (40 ms of start-up), libsndfile's codecs, soxr,
# cpp-httplib with OpenSSL, libcrypto (the digests) or libsentencepiece with protobuf-lite.
#
# One rule from a module's purpose: the sources src/modules/<purpose>/*.cc, the target
# mlc_manifest_<purpose>, the file libmlc_manifest_<purpose>.so, the variable
# $MLC_MANIFEST_<PURPOSE>_MODULE. MLC_MODULES lists the purposes; MLC_MODULE_LIBS_<purpose>, what
# a module links; MLC_MODULE_EXTRA_<purpose>, library sources a module carries its own copy of.
set(MLC_MODULES image audio resampler http crypto sentencepiece)
set(MLC_MODULE_LIBS_image PkgConfig::VIPS PkgConfig::GMODULE)
set(MLC_MODULE_EXTRA_image src/media/image_resize.cc src/media/resize_kernels.cc src/base/error.cc)
set(MLC_MODULE_LIBS_audio PkgConfig::SNDFILE)
set(MLC_MODULE_LIBS_resampler PkgConfig::SOXR)
set(MLC_MODULE_LIBS_http PkgConfig::HTTPLIB Threads::Threads)
set(MLC_MODULE_EXTRA_http src/serve/http_framing.cc src/serve/http_admission.cc src/serve/api_keys.cc)
set(MLC_MODULE_LIBS_crypto OpenSSL::Crypto)
set(MLC_MODULE_LIBS_sentencepiece PkgConfig::SENTENCEPIECE)

function(mlc_add_module purpose)
  set(name mlc_manifest_${purpose})
  file(GLOB sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/modules/${purpose}/*.cc)
  list(TRANSFORM MLC_MODULE_EXTRA_${purpose} PREPEND ${PROJECT_SOURCE_DIR}/ OUTPUT_VARIABLE extra)
  add_library(${name} MODULE ${sources} ${extra})
  set_target_properties(${name} PROPERTIES CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(${name} PRIVATE ${MLC_WARNINGS})
  target_link_libraries(${name} PRIVATE nlohmann_json::nlohmann_json ${MLC_MODULE_LIBS_${purpose}})
  if(NOT MLC_SANITIZE AND NOT MLC_FUZZ)
    # Every symbol resolved at link time (sanitizer runtimes come from the executable).
    target_link_options(${name} PRIVATE -Wl,--no-undefined)
  endif()
endfunction()

foreach(purpose ${MLC_MODULES})
  mlc_add_module(${purpose})
endforeach()
list(TRANSFORM MLC_MODULES PREPEND mlc_manifest_ OUTPUT_VARIABLE MLC_MODULE_TARGETS)
