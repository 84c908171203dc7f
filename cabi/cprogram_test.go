//go:build cgo

package cabi_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedLibBuilt { // only then: sharedLib would build it
		if dir, err := sharedLib(); err == nil {
			os.RemoveAll(dir)
		}
	}
	os.Exit(code)
}

var sharedLibBuilt bool

// sharedLib builds the C shared library once per test binary and returns
// its directory.
var sharedLib = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "cabi-lib-")
	if err != nil {
		return "", err
	}
	sharedLibBuilt = true
	build := exec.Command("go", "build", "-buildmode=c-shared", "-o", filepath.Join(dir, "libfutoin_asyncsteps.so"), "./lib")
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		return "", &buildError{err, out}
	}
	return dir, nil
})

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string { return "go build: " + e.err.Error() + "\n" + string(e.out) }

// buildCProgram compiles testdata/name.c against the shared library, with
// the extra gcc flags, and returns the binary's path.
func buildCProgram(t *testing.T, name string, flags ...string) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go tool")
	}
	lib, err := sharedLib()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), name)
	args := append([]string{"-std=c11", "-Wall", "-Wextra", "-pedantic", "-Werror", "-I."}, flags...)
	args = append(args, "-o", bin, filepath.Join("testdata", name+".c"),
		"-L"+lib, "-lfutoin_asyncsteps", "-Wl,-rpath,"+lib, "-lpthread")
	if out, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return bin
}

// runCProgram runs bin with env added and compares its output with
// testdata/want.
func runCProgram(t *testing.T, bin, want string, env ...string) {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), env...)
	got, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", filepath.Base(bin), err, got)
	}
	w, err := os.ReadFile(filepath.Join("testdata", want))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(w) {
		t.Errorf("%s printed:\n%s\nwant:\n%s", filepath.Base(bin), got, w)
	}
}

// The C program tests: build the shared library and the programs in
// testdata (hello.c: steps, errors, loops, threads; sync.c: the
// constructors of the synchronization objects and a Limiter's
// rejection; pipeline.c: an adopter's request pipeline with error and
// cancel handlers, a timeout, a parallel, a loop, a completion from a
// pthread and a cancel from main), run them, compare their output.
func TestCProgram(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the shared library")
	}
	runCProgram(t, buildCProgram(t, "hello"), "hello.out")
	runCProgram(t, buildCProgram(t, "sync"), "sync.out")
	runCProgram(t, buildCProgram(t, "pipeline"), "pipeline.out")
}

// The C programs under AddressSanitizer (Debian's gcc has it): the
// ten-line program of a step that takes a custom object over (its cleanup
// ran twice, a double free, before the receiver owned what it is given)
// and hello.c and pipeline.c, all with LeakSanitizer: each exits right after
// futoin_asyncsteps_free_wait, which returns once the root's cleanups have
// run.
func TestCProgramsUnderASan(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the shared library")
	}
	supp, err := filepath.Abs(filepath.Join("testdata", "lsan.supp"))
	if err != nil {
		t.Fatal(err)
	}
	asan := []string{"-fsanitize=address", "-fno-omit-frame-pointer", "-g"}
	runCProgram(t, buildCProgram(t, "takeover", asan...), "takeover.out",
		"ASAN_OPTIONS=detect_leaks=1:abort_on_error=0", "LSAN_OPTIONS=suppressions="+supp+":print_suppressions=0")
	runCProgram(t, buildCProgram(t, "hello", asan...), "hello.out",
		"ASAN_OPTIONS=detect_leaks=1:abort_on_error=0", "LSAN_OPTIONS=suppressions="+supp+":print_suppressions=0")
	runCProgram(t, buildCProgram(t, "pipeline", asan...), "pipeline.out",
		"ASAN_OPTIONS=detect_leaks=1:abort_on_error=0", "LSAN_OPTIONS=suppressions="+supp+":print_suppressions=0")
}

// The header compiles without a warning under -pedantic as C99 and as
// C++14 (the spec's anonymous structs and unions included).
func TestHeaderIsPedanticClean(t *testing.T) {
	dir := t.TempDir()
	src := "#include \"futoin_asyncsteps.h\"\nint main(void) { FutoInArgs a; a.arg0.i32 = 1; return a.args[0].i32 - 1; }\n"
	for _, tc := range []struct{ compiler, file, std string }{
		{"gcc", "h.c", "-std=c99"},
		{"g++", "h.cpp", "-std=c++14"},
	} {
		cc, err := exec.LookPath(tc.compiler)
		if err != nil {
			t.Logf("no %s", tc.compiler)
			continue
		}
		file := filepath.Join(dir, tc.file)
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(cc, tc.std, "-pedantic", "-Wall", "-Wextra", "-Werror", "-I.", "-fsyntax-only", file).CombinedOutput()
		if err != nil {
			t.Errorf("%s %s -pedantic: %v\n%s", tc.compiler, tc.std, err, out)
		}
	}
}
