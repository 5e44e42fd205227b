# A thin wrapper around CMake (as neovim's is).  The two commands:
#   make demo   install missing dependencies, build, run one agent turn
#   make test   the same set-up, then the whole ctest suite
BUILD ?= build
CMAKE_FLAGS ?=
JOBS ?= 2

.PHONY: all deps configure build demo test clean

all: build

deps:
	@sh cmake/install-deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

configure: deps $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j$(JOBS)

demo: build
	./$(BUILD)/bin/weir run "Say hello, then tell me what 2 to the power 10 is."

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

clean:
	rm -rf $(BUILD)
