# Top-level entry points. `make demo` and `make test` work on a fresh Debian 12 machine:
# each first installs the Debian packages it needs (scripts/setup.sh).
BUILD ?= build
JOBS ?= $(shell nproc)
PREFIX ?= /usr/local
CMAKE_FLAGS ?=

SAN_BUILD ?= build-asan
FUZZ_SHORT_SECONDS ?= 60
FUZZ_SECONDS ?= 3600
FUZZERS = safetensors config classify_data corpus model_folder tokenizer serve_request

.PHONY: all setup configure build demo test san-configure sanitize fuzz-build fuzz fuzz-short install package \
	clean

all: build

setup:
	scripts/setup.sh

configure:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: setup configure
	cmake --build $(BUILD) -j $(JOBS)

# The demo needs only the program, not the tests and benchmarks.
demo: setup configure
	scripts/setup.sh --demo
	cmake --build $(BUILD) -j $(JOBS) --target linformer
	CORPUS=$(CORPUS) scripts/demo.sh $(BUILD)

# ctest runs two tests at a time, each on every core: OpenMP threads that spin while they wait
# would then take turns with each other's spinning (a GradCheck case 1 s alone, 100 s beside
# another); OMP_WAIT_POLICY=passive makes them sleep instead.
TEST_ENV = OMP_WAIT_POLICY=passive

test:
	scripts/setup.sh --test
	$(MAKE) configure
	cmake --build $(BUILD) -j $(JOBS)
	cd $(BUILD) && $(TEST_ENV) ctest --output-on-failure -j 2

# The whole test suite built with AddressSanitizer + UndefinedBehaviorSanitizer (clang, -O1,
# line tables)
# in $(SAN_BUILD), with the shape checks at kernel and layer entry compiled in (LINFORMER_CHECKS),
# together with the libFuzzer harnesses of tests/fuzz (one instrumented build serves both); the
# first error aborts its test. Suppressions (third-party frames only) are in
# tests/sanitizers/. It is built without MPI (LINFORMER_MPI=OFF: Open MPI's own allocations
# at exit would need suppressions of their own); the data-parallel path and its tests run in
# the ordinary build.
SAN_ENV = ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:abort_on_error=1 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:suppressions=$(CURDIR)/tests/sanitizers/ubsan.supp \
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/sanitizers/lsan.supp:print_suppressions=0
san-configure:
	scripts/setup.sh --test --fuzz
	cmake -S . -B $(SAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DLINFORMER_FUZZ=ON \
		-DLINFORMER_CHECKS=ON -DLINFORMER_BENCH=OFF -DLINFORMER_MPI=OFF -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ $(CMAKE_FLAGS)
sanitize: san-configure
	$(SAN_ENV) cmake --build $(SAN_BUILD) -j $(JOBS)
	cd $(SAN_BUILD) && $(SAN_ENV) $(TEST_ENV) ctest --output-on-failure -j 2

# The libFuzzer harnesses in $(SAN_BUILD): fuzz-short runs each for FUZZ_SHORT_SECONDS (CI),
# fuzz for FUZZ_SECONDS (long runs). The corpus they grow is kept in $(SAN_BUILD)/fuzz/corpus,
# crashes go to $(SAN_BUILD)/fuzz/artifacts.
fuzz-build: san-configure
	cmake --build $(SAN_BUILD) -j $(JOBS) --target $(addprefix fuzz_,$(FUZZERS))
fuzz-short: fuzz-build
	tests/fuzz/run.sh $(SAN_BUILD) $(FUZZ_SHORT_SECONDS) $(FUZZERS)
fuzz: fuzz-build
	tests/fuzz/run.sh $(SAN_BUILD) $(FUZZ_SECONDS) $(FUZZERS)

# The program, library, headers and CMake package config under PREFIX.
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

# Debian packages in $(BUILD): linformer (the program), linformer-dev (library, headers) and
# python3-linformer, portable whatever machine builds them: configured with LINFORMER_NATIVE
# OFF (the program for the x86-64 baseline, the kernels per instruction-set level, chosen at
# run time; CMAKE_FLAGS=-DLINFORMER_NATIVE=ON packages a build for this CPU only).
package: setup
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DLINFORMER_NATIVE=OFF $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)
	cd $(BUILD) && cpack -G DEB

clean:
	rm -rf $(BUILD) $(SAN_BUILD)
