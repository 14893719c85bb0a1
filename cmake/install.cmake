# Install rules, the CMake package config and the Debian packages.
#
#   cmake --install build --prefix P     # P/bin/linformer, P/lib/liblinformer.a,
#                                        # P/include/linformer/, P/lib/cmake/linformer/
#   cd build && cpack -G DEB             # linformer_<v>_<arch>.deb (the program),
#                                        # linformer-dev_<v>_<arch>.deb (library, headers, config)
#                                        # and python3-linformer_<v>_<arch>.deb (the Python
#                                        # module, LINFORMER_PYTHON; its install rules are in
#                                        # python/CMakeLists.txt)
# Another project then does:
#   find_package(linformer CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE linformer::linformer)
include(CMakePackageConfigHelpers)

set(LINFORMER_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/linformer)

install(TARGETS linformer RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT bin)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/configs/ DESTINATION ${CMAKE_INSTALL_DATADIR}/linformer/configs
        COMPONENT bin)
# The released models (models/NAME/: config.json, model.safetensors, tokenizer, model card;
# docs/models.md) go to share/linformer/models, where a bare --model NAME finds them; their
# own package, linformer-models (architecture all), holds them.
file(GLOB LINFORMER_RELEASED_MODELS LIST_DIRECTORIES true ${PROJECT_SOURCE_DIR}/models/*)
list(FILTER LINFORMER_RELEASED_MODELS INCLUDE REGEX "/models/[^/]+$")
set(LINFORMER_MODEL_DIRS)
foreach(m ${LINFORMER_RELEASED_MODELS})
  if(IS_DIRECTORY ${m} AND EXISTS ${m}/model.safetensors)
    list(APPEND LINFORMER_MODEL_DIRS ${m})
  endif()
endforeach()
if(LINFORMER_MODEL_DIRS)
  install(DIRECTORY ${LINFORMER_MODEL_DIRS} DESTINATION ${CMAKE_INSTALL_DATADIR}/linformer/models
          COMPONENT models)
endif()
install(TARGETS linformer_lib EXPORT linformerTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/linformer DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT dev FILES_MATCHING PATTERN "*.h")
install(EXPORT linformerTargets NAMESPACE linformer:: DESTINATION ${LINFORMER_CMAKE_DIR}
        COMPONENT dev)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/linformerConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/linformerConfig.cmake
                              INSTALL_DESTINATION ${LINFORMER_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/linformerConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/linformerConfig.cmake
              ${PROJECT_BINARY_DIR}/linformerConfigVersion.cmake
        DESTINATION ${LINFORMER_CMAKE_DIR} COMPONENT dev)

# Debian packages, one per component. The program's dependencies are read off the binary
# (dpkg-shlibdeps); the development package needs what the package config finds again.
# The packages are meant for other machines: a LINFORMER_NATIVE build runs only on CPUs with
# this one's instruction sets (`make package` configures LINFORMER_NATIVE=OFF).
if(LINFORMER_NATIVE)
  message(WARNING "LINFORMER_NATIVE is ON: packages made from this build (cpack) contain "
                  "-march=native code and die with SIGILL on CPUs older than this one; `make "
                  "package` builds portable ones")
endif()
set(CPACK_PACKAGE_NAME linformer)
set(CPACK_PACKAGE_VENDOR "linformer")
set(CPACK_PACKAGE_CONTACT "linformer developers <linformer@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_COMPONENTS_ALL bin dev)
if(LINFORMER_PYTHON)
  list(APPEND CPACK_COMPONENTS_ALL python)
endif()
if(LINFORMER_MODEL_DIRS)
  list(APPEND CPACK_COMPONENTS_ALL models)
endif()
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_BIN_PACKAGE_NAME linformer)
set(CPACK_DEBIAN_BIN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_BIN_DESCRIPTION "Linformer command-line program
 Pretrains, finetunes, runs and measures Linformer and standard Transformer encoders
 (linformer pretrain | finetune | evaluate | predict | embed | forward | bench | spectrum).")
set(CPACK_DEBIAN_DEV_PACKAGE_NAME linformer-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "libdnnl-dev, ocl-icd-opencl-dev, nlohmann-json3-dev, libsentencepiece-dev, libpcre2-dev, libicu-dev, pkg-config, cmake, g++")
if(LINFORMER_MPI)
  string(APPEND CPACK_DEBIAN_DEV_PACKAGE_DEPENDS ", libopenmpi-dev")
  # mpirun, for data-parallel runs (docs/distributed.md); one process needs only the library.
  set(CPACK_DEBIAN_BIN_PACKAGE_RECOMMENDS "openmpi-bin")
endif()
set(CPACK_DEBIAN_DEV_DESCRIPTION "Linformer C++ library (static) and headers
 The linformer library, its public headers and a CMake package config:
 find_package(linformer CONFIG REQUIRED) then link linformer::linformer.")
# The Python module: its library dependencies read off the extension (dpkg-shlibdeps), the
# interpreter it was built for (the extension's ABI is that minor version's) and numpy.
set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-linformer)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SHLIBDEPS ON)
math(EXPR py_next "${Python3_VERSION_MINOR} + 1")
set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS
    "python3 (>= ${Python3_VERSION_MAJOR}.${Python3_VERSION_MINOR}), python3 (<< ${Python3_VERSION_MAJOR}.${py_next}), python3-numpy")
set(CPACK_DEBIAN_PYTHON_DESCRIPTION "Linformer encoders from Python (import linformer)
 The linformer engine as a Python module: load model folders, tokenize, run the
 encoder, embed and classify texts with numpy arrays in and out, and pretrain or
 finetune with the command's options as keyword arguments (docs/python.md).")
# The released models: data only, for every architecture; the program finds them by name.
set(CPACK_DEBIAN_MODELS_PACKAGE_NAME linformer-models)
set(CPACK_DEBIAN_MODELS_PACKAGE_ARCHITECTURE all)
set(CPACK_DEBIAN_MODELS_PACKAGE_RECOMMENDS "linformer")
set(CPACK_DEBIAN_MODELS_DESCRIPTION "Pretrained Linformer models for the linformer program
 linformer-mini (Linformer attention), standard-mini (its standard-attention twin) and the
 long linformer-mini-4k, each a model folder with its tokenizer and model card (README.md),
 installed in /usr/share/linformer/models: `linformer models` lists them and every command
 accepts their names, e.g. --model linformer-mini (docs/models.md).")
include(CPack)
