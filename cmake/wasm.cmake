# The WebAssembly build (included from CMakeLists.txt under Debian's emscripten; scripts/build wasm):
# the frontend a browser page or Node needs, compiled with the native build's sources and the C
# libraries scripts/wasm/build-c-deps compiles from Debian's source packages into MLC_WASM_PREFIX.
# The output is build/wasm/mlc_manifest.mjs (an ES module factory, the .wasm inlined), which
# wasm/ wraps as the npm package build/wasm/pkg/ (wasm/package.json, index.js, index.d.ts).
#
# In: the contract core (parse, validate, ids, bind), package checks over MEMFS, audio decode
# (our 16-bit WAV path; libsndfile without external codecs for the other WAV/AIFF/... formats,
# WAVE_FORMAT_EXTENSIBLE included; soxr resampling), JPEG decode (libjpeg-turbo) and the
# Pillow-convention resize (also over RGBA pixels), the tokenizers (Oniguruma, utf8proc), the
# conversation template, prompts and the prefill planner. The modules the native build dlopens are
# linked in (wasm/src/module_static.cc), with a portable SHA-256/MD5 as the crypto module.
#
# Left out, each behind an option that is OFF because the part does not build or run there: the
# runtimes and engine (threads, mmap'd weights: MLC_WASM_RUNTIME), the HTTP server (sockets), the
# CLI and the Python module, the libvips image module (non-JPEG images: MLC_WASM_VIPS), the
# SentencePiece module (libsentencepiece with protobuf: MLC_WASM_SENTENCEPIECE). Asking for a
# left-out module at run time is the I/O error a native build gives for a module it cannot load.
option(MLC_WASM_RUNTIME "WebAssembly: the runtimes and engine (need threads; not supported)" OFF)
option(MLC_WASM_VIPS "WebAssembly: the libvips image module (not supported)" OFF)
option(MLC_WASM_SENTENCEPIECE "WebAssembly: the SentencePiece module (not supported)" OFF)
foreach(part RUNTIME VIPS SENTENCEPIECE)
  if(MLC_WASM_${part})
    message(FATAL_ERROR "MLC_WASM_${part}: that part does not build for WebAssembly yet")
  endif()
endforeach()
set(MLC_WASM_PREFIX ${PROJECT_BINARY_DIR}/prefix CACHE PATH "Where build-c-deps installed the C libraries")

# The header-only dependencies come from the host's Debian packages (nlohmann-json3-dev,
# libdlpack-dev), copied beside the build so that no host include folder shadows emscripten's libc.
foreach(header nlohmann/json.hpp dlpack/dlpack.h)
  get_filename_component(folder ${header} DIRECTORY)
  find_path(MLC_WASM_HOST_${folder} ${header} PATHS /usr/include NO_CMAKE_FIND_ROOT_PATH REQUIRED)
  file(COPY ${MLC_WASM_HOST_${folder}}/${folder} DESTINATION ${PROJECT_BINARY_DIR}/host-include)
endforeach()
foreach(lib soxr mlc_glibc_m sndfile onig utf8proc jpeg)
  find_library(MLC_WASM_LIB_${lib} NAMES ${lib} PATHS ${MLC_WASM_PREFIX}/lib NO_DEFAULT_PATH
               NO_CMAKE_FIND_ROOT_PATH REQUIRED)
endforeach()

file(GLOB_RECURSE MLC_WASM_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/*.cc)
list(FILTER MLC_WASM_SOURCES EXCLUDE REGEX "/src/(cli|modules|python|runtime|engine|serve)/")
list(FILTER MLC_WASM_SOURCES EXCLUDE REGEX "/src/capi/session\\.cc$|/src/base/module_open\\.cc$")
set(MLC_WASM_MODULES audio resampler crypto)
foreach(purpose audio resampler)
  file(GLOB module_sources ${PROJECT_SOURCE_DIR}/src/modules/${purpose}/*.cc)
  list(APPEND MLC_WASM_SOURCES ${module_sources})
endforeach()
file(GLOB wasm_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/wasm/src/*.cc)
list(APPEND MLC_WASM_SOURCES ${wasm_sources})

configure_file(${PROJECT_SOURCE_DIR}/cmake/version.h.in
               ${PROJECT_BINARY_DIR}/include/mlc_manifest/version.h @ONLY)
# C++ exceptions are caught at the C API's boundary (capi_internal.h's Guard).
set(MLC_WASM_FLAGS -fexceptions)
add_executable(mlc_manifest_wasm ${MLC_WASM_SOURCES})
set_target_properties(mlc_manifest_wasm PROPERTIES OUTPUT_NAME mlc_manifest SUFFIX ".mjs"
                      LINK_DEPENDS "${PROJECT_SOURCE_DIR}/wasm/node_shim.js;${PROJECT_SOURCE_DIR}/wasm/exports.txt")
target_include_directories(mlc_manifest_wasm PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_BINARY_DIR}/include
                           ${PROJECT_SOURCE_DIR}/src ${PROJECT_BINARY_DIR}/host-include ${MLC_WASM_PREFIX}/include)
target_compile_definitions(mlc_manifest_wasm PRIVATE MLC_MANIFEST_BUILDING
                           MLC_WASM_MODULE_audio MLC_WASM_MODULE_resampler MLC_WASM_MODULE_crypto)
target_compile_options(mlc_manifest_wasm PRIVATE ${MLC_WARNINGS} ${MLC_WASM_FLAGS})
target_link_libraries(mlc_manifest_wasm PRIVATE ${MLC_WASM_LIB_soxr} ${MLC_WASM_LIB_mlc_glibc_m}
                      ${MLC_WASM_LIB_sndfile} ${MLC_WASM_LIB_onig} ${MLC_WASM_LIB_utf8proc} ${MLC_WASM_LIB_jpeg})
# Linked at -O1: Debian's emscripten 3.1.6 optimizer breaks at -O2. The C API (mlc_*) is what
# the JavaScript wrapper calls; MEMFS holds the packages and tokenizers it writes; node_shim.js
# gives the ES module the CommonJS names emscripten's Node support uses.
target_link_options(mlc_manifest_wasm PRIVATE ${MLC_WASM_FLAGS} -O1 -sSINGLE_FILE=1
  -sEMULATE_FUNCTION_POINTER_CASTS=1 -sMODULARIZE=1 -sEXPORT_ES6=1 -sEXPORT_NAME=createMlcManifest
  -sENVIRONMENT=web,node -sALLOW_MEMORY_GROWTH=1 -sFORCE_FILESYSTEM=1
  "-sEXPORTED_FUNCTIONS=@${PROJECT_SOURCE_DIR}/wasm/exports.txt"
  "--extern-pre-js=${PROJECT_SOURCE_DIR}/wasm/node_shim.js"
  -sEXPORTED_RUNTIME_METHODS=UTF8ToString,stringToUTF8,lengthBytesUTF8,FS,HEAPU8,HEAP32,HEAPF32,HEAPU32)
