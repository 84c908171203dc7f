//go:build cgo

package cabi_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func runCProgram(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool")
	}
	dir := t.TempDir()
	lib := filepath.Join(dir, "libfutoin_asyncsteps.so")
	build := exec.Command(goTool, "build", "-buildmode=c-shared", "-o", lib, "./lib")
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	bin := filepath.Join(dir, "hello")
	cc := exec.Command(gcc, "-std=c11", "-Wall", "-Wextra", "-pedantic", "-Werror", "-I.",
		"-o", bin, filepath.Join("testdata", "hello.c"),
		"-L"+dir, "-lfutoin_asyncsteps", "-Wl,-rpath,"+dir, "-lpthread")
	if out, err := cc.CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	got, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatalf("hello: %v\n%s", err, got)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "hello.out"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("hello printed:\n%s\nwant:\n%s", got, want)
	}
}
