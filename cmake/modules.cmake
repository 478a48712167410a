# The audio, resampler, HTTP, crypto and SentencePiece modules (included from CMakeLists.txt),
# built like the image module: shared objects the library opens with dlopen when a command first
# needs them (src/base/module_loader.cc), each exporting one C table (src/media/audio_backend.h,
# src/media/resampler_backend.h, src/serve/http_backend.h, src/base/crypto_backend.h,
# src/text/sp_backend.h), so that only the commands using them load libsndfile's codecs, soxr,
# cpp-httplib with OpenSSL, libcrypto (the digests) or libsentencepiece with protobuf-lite.
function(mlc_add_module name)
  cmake_parse_arguments(M "" "" "SOURCES;LIBS" ${ARGN})
  add_library(${name} MODULE ${M_SOURCES})
  set_target_properties(${name} PROPERTIES CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(${name} PRIVATE ${MLC_WARNINGS})
  target_link_libraries(${name} PRIVATE nlohmann_json::nlohmann_json ${M_LIBS})
  if(NOT MLC_SANITIZE AND NOT MLC_FUZZ)
    # Every symbol resolved at link time (sanitizer runtimes come from the executable).
    target_link_options(${name} PRIVATE -Wl,--no-undefined)
  endif()
endfunction()

mlc_add_module(mlc_manifest_audio SOURCES ${PROJECT_SOURCE_DIR}/src/audio_module/audio_module.cc
               LIBS PkgConfig::SNDFILE)
mlc_add_module(mlc_manifest_soxr SOURCES ${PROJECT_SOURCE_DIR}/src/soxr_module/soxr_module.cc
               LIBS PkgConfig::SOXR)
file(GLOB MLC_HTTP_MODULE_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/http_module/*.cc)
mlc_add_module(mlc_manifest_http SOURCES ${MLC_HTTP_MODULE_SOURCES}
               LIBS PkgConfig::HTTPLIB Threads::Threads)
mlc_add_module(mlc_manifest_crypto SOURCES ${PROJECT_SOURCE_DIR}/src/crypto_module/crypto_module.cc
               LIBS OpenSSL::Crypto)
mlc_add_module(mlc_manifest_sentencepiece
               SOURCES ${PROJECT_SOURCE_DIR}/src/sentencepiece_module/sentencepiece_module.cc
               LIBS PkgConfig::SENTENCEPIECE)
