package asyncsteps_test

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The hostile-user suite runs every test in a child process, a re-exec of
// the test binary limited to that one test: a test that crashes the
// process, or hangs, is then a failing test that shows the child's output
// (with a dump of every goroutine for a hang), not a dead go test.

// childEnv names, in a child, the test it runs.
const childEnv = "ASYNCSTEPS_HOSTILE_CHILD"

// childTimeout is how long a child may run before it counts as hung. Every
// case takes well under a second; the margin is for a loaded machine and
// the race detector.
const childTimeout = 60 * time.Second

// inChild runs body in a child process, or, in the child, runs it.
func inChild(t *testing.T, body func(t *testing.T)) {
	t.Helper()
	inChildFor(t, childTimeout, body)
}

// inChildFor is inChild with the time after which the child counts as
// hung.
func inChildFor(t *testing.T, timeout time.Duration, body func(t *testing.T)) {
	t.Helper()
	if os.Getenv(childEnv) == t.Name() {
		body(t)
		return
	}
	if os.Getenv(childEnv) != "" {
		t.Skip("another test's child")
	}
	t.Parallel()
	out, err, hung := runChild(t.Name(), timeout)
	switch {
	case hung:
		t.Fatalf("the child hung for %v; its output, with its goroutines:\n%s", timeout, out)
	case err != nil:
		t.Fatalf("the child failed (%v); its output:\n%s", err, out)
	case !strings.Contains(out, "--- PASS: "+t.Name()+" "):
		t.Fatalf("the child did not pass %s; its output:\n%s", t.Name(), out)
	}
	for line := range strings.Lines(out) {
		if strings.Contains(line, "units in") { // a measurement (see measure)
			t.Log(strings.TrimSpace(line))
		}
	}
}

// runChild runs the test named name in a child process. After timeout it
// sends SIGQUIT, which makes the Go runtime print every goroutine and exit,
// and kills the child if it is still there 5 seconds later.
func runChild(name string, timeout time.Duration) (out string, err error, hung bool) {
	args := []string{"-test.run=" + runPattern(name), "-test.v", "-test.count=1", "-test.timeout=0"}
	if testing.Short() {
		args = append(args, "-test.short")
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), childEnv+"="+name, "GOTRACEBACK=all")
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		return "", err, false
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(timeout):
		hung = true
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case err = <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			err = <-done
		}
	}
	return buf.String(), err, hung
}

// runPattern is the -test.run pattern that matches the test name only,
// each level of subtests anchored.
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// The harness itself must see a crash and a hang: a child that exits in
// the middle of its test, and one that never ends.
func TestHostileHarnessSeesCrashesAndHangs(t *testing.T) {
	switch os.Getenv(childEnv) {
	case t.Name() + "/crash":
		os.Exit(3)
	case t.Name() + "/hang":
		time.Sleep(time.Hour)
	case "":
	default:
		t.Skip("another test's child")
	}
	t.Run("crash", func(t *testing.T) {
		if os.Getenv(childEnv) != "" {
			return
		}
		out, err, hung := runChild(t.Name(), childTimeout)
		if err == nil || hung {
			t.Errorf("a child that exits with status 3: err %v, hung %v; output:\n%s", err, hung, out)
		}
	})
	t.Run("hang", func(t *testing.T) {
		if os.Getenv(childEnv) != "" {
			return
		}
		out, err, hung := runChild(t.Name(), 2*time.Second)
		if !hung || err == nil || !strings.Contains(out, "goroutine ") {
			t.Errorf("a child that hangs: err %v, hung %v; want a goroutine dump in its output:\n%s", err, hung, out)
		}
	})
}
