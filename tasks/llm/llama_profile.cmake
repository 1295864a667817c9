# The build profile of setup's llama.cpp compile (tasks/llm/llama_build.py passes this file as CMAKE_PROJECT_INCLUDE).
# On 2 cores the compile is setup's long pole, and most of it is the C++ front end parsing the same heavy headers
# (nlohmann/json, the chat-template engine) again for each small source file of common, the server and the
# multimodal library. So those targets build as unity builds (batches of sources compiled as one), as llama.cpp itself
# already builds libllama's model files, and they and the HTTP library build at -O0, libllama at -O1: only ggml's
# kernels do inference's arithmetic, and they keep the release -O3 (as do a few tiny helper targets). Measured: the
# compile 336 s against 688 s on 2 cores, the server as fast within the machine's noise (benchmarks/llama_build.py,
# docs/benchmarks.md).
# -DSTSGEN_LLAMA_PROFILE=OFF in STSGEN_LLAMA_CMAKE_ARGS builds llama.cpp exactly as released.
include_guard(GLOBAL)
if(CMAKE_VERSION VERSION_LESS 3.19)  # no cmake_language(DEFER): the release build
  return()
endif()

function(_stsgen_llama_profile)
  if(DEFINED STSGEN_LLAMA_PROFILE AND NOT STSGEN_LLAMA_PROFILE)
    return()
  endif()
  # Sources that do not compile inside a unity batch: mtmd's non-model sources (an #error guards the helper's
  # headers; llama.cpp's own unity build of libllama likewise keeps only the model files), common's JSON
  # specialisations (declared after their first use in a batch). A later llama.cpp may rename a target or one of
  # these files: that target then builds as released (a renamed file would otherwise land in a batch and fail).
  set(mtmd_dir ${CMAKE_SOURCE_DIR}/tools/mtmd)
  set(apart_mtmd ${mtmd_dir}/mtmd.cpp ${mtmd_dir}/mtmd-audio.cpp ${mtmd_dir}/mtmd-image.cpp ${mtmd_dir}/mtmd-helper.cpp
                 ${mtmd_dir}/mtmd-helper-gen.cpp ${mtmd_dir}/clip.cpp)
  set(apart_llama-common ${CMAKE_SOURCE_DIR}/common/json.cpp)
  foreach(target IN ITEMS llama-common mtmd server-context llama-server-impl)
    set(apart ${apart_${target}})
    set(all_there TRUE)
    foreach(file IN LISTS apart)
      if(NOT EXISTS ${file})
        set(all_there FALSE)
      endif()
    endforeach()
    if(TARGET ${target} AND all_there)
      set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 16)
      if(apart)
        set_source_files_properties(${apart} TARGET_DIRECTORY ${target} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
      endif()
    endif()
  endforeach()
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")  # -O levels as GCC and Clang spell them
    return()
  endif()
  foreach(spec IN ITEMS "llama:-O1" "llama-common:-O0" "server-context:-O0" "llama-server-impl:-O0" "llama-server:-O0"
                        "mtmd:-O0" "cpp-httplib:-O0")
    string(REPLACE ":" ";" parts "${spec}")
    list(GET parts 0 target)
    list(GET parts 1 level)
    if(TARGET ${target})
      target_compile_options(${target} PRIVATE ${level})  # after CMAKE_CXX_FLAGS_RELEASE's -O3: the last -O wins
    endif()
  endforeach()
endfunction()

# Deferred to the end of the top-level CMakeLists, when every target exists.
cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL _stsgen_llama_profile)
