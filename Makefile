# tadocfs build. `make` builds the library, `tadoc` and `tadocfs`; `make test` builds a normal
# and a sanitizer (ASan+UBSan) tree and runs the whole suite under the sanitizer build;
# it also runs the stress test on a ThreadSanitizer build (build/tsan; `make tsan` adds fsx);
# `make demo` runs the main job on the bundled sample; `make bench` runs the benchmarks.
# `make lib` adds the shared library and tadoc.pc, `make install` installs everything
# (PREFIX, DESTDIR), `make deb` builds the Debian packages into build/deb-out/.
# GPU=0 skips CUDA; otherwise kernels/*.cu are built when nvcc is found.

CC      ?= cc
SAN     ?= 0
GPU     ?= auto
NVCC    ?= $(firstword $(shell command -v nvcc 2>/dev/null) $(wildcard /usr/local/cuda/bin/nvcc))
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))

ifeq ($(SAN),1)
BUILD   ?= build/san
SANFLAGS = -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
OPT      = -O1
else ifeq ($(SAN),thread)
BUILD   ?= build/tsan
SANFLAGS = -fsanitize=thread -fno-omit-frame-pointer
OPT      = -O1
else
BUILD   ?= build/rel
SANFLAGS =
OPT      = -O2
endif

CFLAGS_ALL = -std=c11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 $(OPT) -g -Wall -Wextra -Werror \
             -pthread $(SANFLAGS) $(shell pkg-config --cflags fuse3 2>/dev/null) $(CPPFLAGS) $(CFLAGS)
LDLIBS_ALL = -lzstd -lxxhash -pthread $(SANFLAGS) $(LDFLAGS)

ENGINE_SRC = $(wildcard engine/*/*.c) $(wildcard lib/*.c)
ENGINE_OBJ = $(ENGINE_SRC:%.c=$(BUILD)/%.o)

ifneq ($(GPU),0)
ifneq ($(NVCC),)
CU_SRC   = $(wildcard kernels/*.cu)
CU_OBJ   = $(CU_SRC:%.cu=$(BUILD)/%.cu.o)
CFLAGS_ALL += -DTDC_HAVE_CUDA
LDLIBS_ALL += -L$(CUDA_HOME)/lib64 -L$(CUDA_HOME)/targets/x86_64-linux/lib -lcudart_static -ldl -lrt -lstdc++
GPU_BIN  = $(BUILD)/tests/gpucheck
NVFLAGS  = -O2 -g -std=c++17 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 \
           -Xcompiler -Wall,-Wextra,-Werror
endif
endif

# Two static libraries, following the layers (docs/DESIGN.md section 1): libtadoc.a holds
# engine/ and lib/; libtadoc_gpu.a the CUDA kernels, which implement engine/backend/gpu_api.h
# (and use the engine's error and buffer helpers, hence the group on the link lines).
LIB   = $(BUILD)/libtadoc.a
ifneq ($(CU_OBJ),)
GPULIB = $(BUILD)/libtadoc_gpu.a
endif
LIBS  = $(LIB) $(GPULIB)
LINK_LIBS = -Wl,--start-group $(LIBS) -Wl,--end-group
TOOLS = $(BUILD)/tadoc $(BUILD)/tadocfs
# tadoc-mpi (the analytics over the ranks of an MPI job) where Open MPI's mpicc is found:
# optional, like the CUDA part; the rest never needs it.
MPICC ?= $(shell command -v mpicc 2>/dev/null)
ifneq ($(MPICC),)
MPI_BIN = $(BUILD)/tadoc-mpi
endif
UNIT_SRC = $(wildcard tests/unit/test_*.c)
UNIT_BIN = $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
HELPERS  = $(patsubst tests/tools/%.c,$(BUILD)/tests/%,$(wildcard tests/tools/*.c)) \
           $(BUILD)/bench/extractlat $(BUILD)/bench/querylat $(BUILD)/bench/fuseceil $(BUILD)/bench/fsynclat \
           $(BUILD)/bench/mreads $(BUILD)/bench/firstbyte
FUSE_LIBS = $(shell pkg-config --libs fuse3 2>/dev/null || echo -lfuse3)

# Fuzz targets (tests/fuzz/fuzz_*.c). The normal build links them with a plain main that
# replays files (tests/bats/fuzz.bats runs the seeds and regressions through it); FUZZ=1 (as
# `make fuzz` sets, with clang) links them with libFuzzer.
FUZZ_NAMES = arc jrnl tok apply
FUZZ_BIN   = $(FUZZ_NAMES:%=$(BUILD)/tests/fuzz_%)
ifeq ($(FUZZ),1)
FUZZ_MAIN  =
FUZZ_LINK  = -fsanitize=fuzzer
else
FUZZ_MAIN  = $(BUILD)/tests/fuzz/standalone.o
FUZZ_LINK  =
endif
FUZZ_SECONDS ?= 60
FUZZ_SAN   = -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer

PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
# mount(8) looks for mount.TYPE helpers in /sbin only, whatever the prefix.
SBINDIR ?= /sbin
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR ?= $(PREFIX)/share/man
DOCDIR ?= $(PREFIX)/share/doc/tadoc
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions

# libtadoc as a shared library: soname libtadoc.so.$(SOVERSION), exporting only the API of
# include/tadoc.h (lib/tadoc.map). Its objects are position-independent copies of the engine
# objects, compiled into $(BUILD)/pic only when `make lib` asks, so `make all` is unchanged.
# PIC=1 makes every object position-independent instead (the package build: the engine is
# compiled once for tools, static and shared library). The shared library never has CUDA.
VERSION   = 0.1.0
SOVERSION = 0
PICFLAGS  = -fPIC -fno-semantic-interposition
ifeq ($(PIC),1)
CFLAGS_ALL += $(PICFLAGS)
PIC_OBJ = $(ENGINE_OBJ)
else
PIC_OBJ = $(ENGINE_SRC:%.c=$(BUILD)/pic/%.o)
endif
SHLIB = $(BUILD)/libtadoc.so.$(VERSION)
PCFILE = $(BUILD)/tadoc.pc

.PHONY: FORCE tsan fuzz fuzz-build test-long all clean test demo bench deps format install lib \
        tools deb
.SECONDARY:
all: $(TOOLS) $(MPI_BIN) $(HELPERS) $(UNIT_BIN) $(GPU_BIN) $(FUZZ_BIN)

# Objects are rebuilt when the flags change: a build folder made with CUDA and then without
# (or with other CFLAGS) would otherwise link objects of both. $(BUILD)/.flags holds the
# flags of the last build and changes only when they do.
FLAGS_FILE = $(BUILD)/.flags
FLAGS_NOW = $(CC) $(CFLAGS_ALL) | $(NVCC) $(NVFLAGS) | $(LDLIBS_ALL)
$(FLAGS_FILE): FORCE
	@mkdir -p $(dir $@)
	@echo '$(FLAGS_NOW)' | cmp -s - $@ || echo '$(FLAGS_NOW)' >$@
FORCE:

$(BUILD)/%.o: %.c $(FLAGS_FILE)
	@mkdir -p $(dir $@)
	@echo "  CC    $<"
	@$(CC) $(CFLAGS_ALL) -MMD -MP -c $< -o $@

$(BUILD)/%.cu.o: %.cu $(FLAGS_FILE)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -MMD -MP -c $< -o $@

$(LIB): $(ENGINE_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(GPULIB): $(CU_OBJ)
	@rm -f $@
	ar rcs $@ $^

tools: $(TOOLS)
lib: $(LIBS) $(SHLIB) $(PCFILE)

$(BUILD)/pic/%.o: %.c $(FLAGS_FILE)
	@mkdir -p $(dir $@)
	@echo "  CC    $< (PIC)"
	@$(CC) $(filter-out -DTDC_HAVE_CUDA,$(CFLAGS_ALL)) $(PICFLAGS) -MMD -MP -c $< -o $@

# --no-undefined: every engine symbol must resolve inside the library or its listed libraries.
$(SHLIB): $(PIC_OBJ) lib/tadoc.map
	$(CC) -shared -Wl,-soname,libtadoc.so.$(SOVERSION) -Wl,--version-script=lib/tadoc.map \
	    -Wl,--no-undefined -o $@ $(PIC_OBJ) -lzstd -lxxhash -pthread $(LDFLAGS)
	ln -sf $(notdir $@) $(BUILD)/libtadoc.so.$(SOVERSION)
	ln -sf $(notdir $@) $(BUILD)/libtadoc.so

$(PCFILE): lib/tadoc.pc.in Makefile
	@mkdir -p $(dir $@)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
	    -e 's|@VERSION@|$(VERSION)|' $< > $@

$(BUILD)/tadoc: $(BUILD)/tools/tadoc.o $(BUILD)/tools/edit.o $(BUILD)/tools/extract.o $(LIBS)
	$(CC) -o $@ $(filter-out %.a,$^) $(LINK_LIBS) $(LDLIBS_ALL)

MPI_OBJ = $(BUILD)/tools/tadoc_mpi.o $(BUILD)/tools/mpi_pack.o $(BUILD)/tools/mpi_query.o
$(MPI_OBJ): CFLAGS_ALL += $(shell $(MPICC) --showme:compile 2>/dev/null)
$(BUILD)/tadoc-mpi: $(MPI_OBJ) $(LIBS)
	$(CC) -o $@ $(filter-out %.a,$^) $(LINK_LIBS) $(shell $(MPICC) --showme:link) $(LDLIBS_ALL)

FS_OBJ = $(patsubst %.c,$(BUILD)/%.o,$(wildcard fs/*.c))
$(BUILD)/tadocfs: $(FS_OBJ) $(LIBS)
	$(CC) -o $@ $(filter-out %.a,$^) $(LINK_LIBS) $(FUSE_LIBS) $(LDLIBS_ALL)

$(BUILD)/bench/fuseceil: $(BUILD)/bench/fuseceil.o
	$(CC) -o $@ $^ $(FUSE_LIBS) $(LDLIBS_ALL)

$(BUILD)/tests/test_%: $(BUILD)/tests/unit/test_%.o $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $(filter-out %.a,$^) $(LINK_LIBS) -lcmocka $(LDLIBS_ALL)

# The daemon's registry of virtual inodes, tested alone (fs/ is no library).
$(BUILD)/tests/test_sreg: $(BUILD)/tests/unit/test_sreg.o $(BUILD)/fs/sreg.o $(BUILD)/fs/vtext.o $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $(filter-out %.a,$^) $(LINK_LIBS) -lcmocka $(LDLIBS_ALL)

$(BUILD)/tests/gpucheck: $(BUILD)/tests/gpu/gpucheck.o $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $(filter-out %.a,$^) $(LINK_LIBS) $(LDLIBS_ALL)

# The section-coder measurements (issue 18) try htscodecs' rANS and arithmetic coders and
# LZMA besides zstd; the archive itself needs neither.
$(BUILD)/tests/codecs: $(BUILD)/tests/tools/codecs.o $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $(filter-out %.a,$^) $(LINK_LIBS) -lhtscodecs -llzma -lm $(LDLIBS_ALL)

$(BUILD)/tests/%: $(BUILD)/tests/tools/%.o $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $(filter-out %.a,$^) $(LINK_LIBS) $(LDLIBS_ALL)

$(BUILD)/tests/fuzz_apply: $(BUILD)/tests/fuzz/fuzz_apply.o $(BUILD)/tools/edit.o $(FUZZ_MAIN) $(LIBS)
	$(CC) -o $@ $(filter-out %.a,$^) $(LINK_LIBS) $(FUZZ_LINK) $(LDLIBS_ALL)

$(BUILD)/tests/fuzz_%: $(BUILD)/tests/fuzz/fuzz_%.o $(FUZZ_MAIN) $(LIBS)
	$(CC) -o $@ $(filter-out %.a,$^) $(LINK_LIBS) $(FUZZ_LINK) $(LDLIBS_ALL)

$(BUILD)/bench/%: $(BUILD)/bench/%.o $(LIBS)
	$(CC) -o $@ $(filter-out %.a,$^) $(LINK_LIBS) $(LDLIBS_ALL)

deps:
	@tools/deps.sh build test

# The sanitizer builds leave the CUDA kernels out (GPU=0): the suite runs where there is no
# GPU, the normal build compiles them and its tools take the no-GPU path in the tests that
# use them, and nvcc would take a minute more of every run. The builds use every CPU (CI
# runs a plain `make test`).
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
test: deps
	$(MAKE) -j$(JOBS) all
	$(MAKE) -j$(JOBS) SAN=1 GPU=0 all
	$(MAKE) -j$(JOBS) SAN=thread GPU=0 all
	@BUILD=build/san TSAN_BUILD=build/tsan tests/run.sh

# The long random-operation runs: 100,000 fsx operations per file on a mounted archive, and
# the whole-tree model test (model.bats) with 20 times its usual operations per seed.
test-long: deps
	$(MAKE) SAN=1 all
	@BUILD=build/san FSX_OPS=100000 BATS_ONLY=fsx.bats tests/run.sh
	@BUILD=build/san MODEL_OPS=10000 BATS_ONLY=model.bats tests/run.sh

# libFuzzer builds of the fuzz targets (clang, ASan+UBSan) in build/fuzz, each run for
# FUZZ_SECONDS from its seeds (tests/fuzz/seeds/); crashes land in build/fuzz/crashes/.
fuzz-build:
	@tools/deps.sh build fuzz
	$(MAKE) CC=clang BUILD=build/fuzz FUZZ=1 GPU=0 SAN=0 \
	    CFLAGS="-O1 -fsanitize=fuzzer-no-link $(FUZZ_SAN)" LDFLAGS="$(FUZZ_SAN)" \
	    $(FUZZ_NAMES:%=build/fuzz/tests/fuzz_%)

fuzz: fuzz-build
	@tests/fuzz/run.sh build/fuzz $(FUZZ_SECONDS) $(FUZZ_NAMES)

# ThreadSanitizer build of everything (build/tsan), then the stress test and fsx on a mount
# of the TSan daemon; any report fails the test.
tsan: deps
	$(MAKE) SAN=thread GPU=0 all
	@BUILD=build/tsan BATS_ONLY=stress.bats tests/run.sh
	@BUILD=build/tsan BATS_ONLY=fsx.bats tests/run.sh

# The demo needs only the tools (no cmocka, bats or test corpora): its own package group.
demo:
	@tools/deps.sh build demo
	$(MAKE) tools
	@tools/demo.sh build/rel

bench: deps
	@tools/deps.sh bench
	$(MAKE) all
	@bench/run.sh build/rel

# tadocfs in $(BINDIR) is what `mount -t fuse.tadocfs` (and /etc/fstab) runs through
# mount.fuse3, which searches the PATH; mount.tadocfs in $(SBINDIR) makes `mount -t tadocfs`
# work too. The library goes in with its header, tadoc.pc and the example program.
install: $(TOOLS) lib
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(SBINDIR) $(DESTDIR)$(LIBDIR)/pkgconfig \
	    $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man8 \
	    $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(DOCDIR)/examples
	install -m 0755 $(TOOLS) $(DESTDIR)$(BINDIR)/
	install -m 0755 tools/mount.tadocfs $(DESTDIR)$(SBINDIR)/
	install -m 0644 $(LIBS) $(DESTDIR)$(LIBDIR)/
	install -m 0644 $(SHLIB) $(DESTDIR)$(LIBDIR)/
	ln -sf libtadoc.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libtadoc.so.$(SOVERSION)
	ln -sf libtadoc.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libtadoc.so
	install -m 0644 $(PCFILE) $(DESTDIR)$(LIBDIR)/pkgconfig/
	install -m 0644 include/tadoc.h $(DESTDIR)$(INCLUDEDIR)/
	install -m 0644 man/tadoc.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 man/tadocfs.8 $(DESTDIR)$(MANDIR)/man8/
	ln -sf tadocfs.8 $(DESTDIR)$(MANDIR)/man8/mount.tadocfs.8
	install -m 0644 tools/tadoc.bash-completion $(DESTDIR)$(BASHCOMPDIR)/tadoc
	install -m 0644 docs/example.c $(DESTDIR)$(DOCDIR)/examples/

# The Debian packages (tadoc, libtadoc0, libtadoc-dev) with dpkg-buildpackage, built from a
# copy of the sources in build/deb-src, into build/deb-out/ with lintian's report; a no-op
# while the sources are unchanged since the last build.
deb:
	@tools/deps.sh build deb
	@tools/mkdeb.sh

format:
	clang-format -i $(shell git ls-files '*.c' '*.h' '*.cu')

clean:
	rm -rf build tests/tmp

-include $(shell find build -name '*.d' 2>/dev/null)
