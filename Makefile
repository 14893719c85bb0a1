# Top-level entry points. `make demo` and `make test` work on a fresh Debian 12 machine:
# each first installs the Debian packages it needs (scripts/setup.sh).
BUILD ?= build
JOBS ?= $(shell nproc)
PREFIX ?= /usr/local
CMAKE_FLAGS ?=

.PHONY: all setup configure build demo test install package clean

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

test:
	scripts/setup.sh --test
	$(MAKE) configure
	cmake --build $(BUILD) -j $(JOBS)
	cd $(BUILD) && ctest --output-on-failure -j 2

# The program, library, headers and CMake package config under PREFIX.
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

# Debian packages in $(BUILD): linformer (the program) and linformer-dev (library, headers).
package: build
	cd $(BUILD) && cpack -G DEB

clean:
	rm -rf $(BUILD)
