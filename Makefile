# mlengine: the two commands are `make demo` and `make test`.
# Every target installs what is missing first (Debian packages, needs root).

BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: all deps build test unit demo demo-slurm bench package clean

all: build

deps:
	@./scripts/install-deps.sh

$(BUILD)/build.ninja: CMakeLists.txt
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# Every test: unit, integration over real HTTP, the real Google clients,
# containers, Slurm. mlengine's container base images
# (scripts/containers/images.sh) are built while the code compiles: the first
# time on a machine they take minutes.
test: deps $(BUILD)/build.ninja
	@./scripts/containers/images.sh build > $(BUILD)/images.log 2>&1 & images=$$!; \
	  cmake --build $(BUILD) -j $(JOBS) || { kill $$images; exit 1; }; \
	  wait $$images || { echo "images.sh failed:"; cat $(BUILD)/images.log; exit 1; }
	./scripts/install-node-deps.sh
	./scripts/run-tests.sh $(BUILD)

demo: build
	./scripts/demo.sh $(BUILD)

# The same walkthrough on the local 4-node Slurm cluster (mlengined --executor slurm).
demo-slurm: build
	MLENGINE_DEMO_EXECUTOR=slurm ./scripts/demo.sh $(BUILD)

bench: build
	./bench/run.sh $(BUILD)

# mlengine_VERSION_amd64.deb in $(BUILD) (docs/operations.md, "Install and run as a service").
package: build
	cmake --build $(BUILD) --target debian_docs
	cd $(BUILD) && cpack -G DEB

clean:
	rm -rf $(BUILD)
