package asynchttptest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps/asynchttp/asynchttptest"
)

// childEnv names, in a child process, the test it runs.
const childEnv = "ASYNCHTTPTEST_CHILD"

// inChild runs body in a re-exec of the test binary limited to this test,
// or, in that child, runs it: a Transport that ends the process with a
// fatal error, or hangs, is then a failing test that shows the child's
// output (its goroutines, for a hang), not a dead go test.
func inChild(t *testing.T, body func(t *testing.T)) {
	t.Helper()
	if os.Getenv(childEnv) == t.Name() {
		body(t)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+regexp.QuoteMeta(t.Name())+"$",
		"-test.v", "-test.count=1", "-test.timeout=0")
	cmd.Env = append(os.Environ(), childEnv+"="+t.Name(), "GOTRACEBACK=all")
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) } // a hang prints the goroutines
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()+" ") {
		t.Fatalf("the child failed (%v); its output:\n%s", err, out)
	}
}

// hello answers "hello".
var hello = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") })

// get sends a GET through tr and returns the body of its answer.
func get(t *testing.T, tr *asynchttptest.Transport) string {
	t.Helper()
	resp, err := tr.Client().Get("http://upstream.test/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// A Transport shared by tests serves them in turn, in a bubble or
// outside any, with no Wait between them. (A sync.WaitGroup that counted
// a request in a bubble ended the process with a fatal error at the
// next request outside it.)
func TestTransportServesSeveralBubblesInTurn(t *testing.T) {
	inChild(t, func(t *testing.T) {
		tr := &asynchttptest.Transport{Handler: hello}
		var got []string
		synctest.Test(t, func(t *testing.T) { got = append(got, get(t, tr)) })
		synctest.Test(t, func(t *testing.T) { got = append(got, get(t, tr)) })
		got = append(got, get(t, tr))
		synctest.Test(t, func(t *testing.T) { got = append(got, get(t, tr)) })
		tr.Wait()
		if strings.Join(got, " ") != "hello hello hello hello" {
			t.Errorf("answers %q", got)
		}
	})
}

// slowUpstream, declared at package level, answers after a second,
// whatever its client does.
var slowUpstream = &asynchttptest.Transport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	time.Sleep(time.Second)
})}

// The Wait of a Transport declared at package level, which a bubble
// cannot tie to itself, blocks durably: the bubble's clock moves on to
// the end of the handler the client left. (A sync.WaitGroup's Wait did
// not, and the test hung.)
func TestTransportWaitOfAPackageTransport(t *testing.T) {
	inChild(t, func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://upstream.test/", nil)
			_, err := slowUpstream.Client().Do(req)
			slowUpstream.Wait()
			if took := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || took != time.Second {
				t.Errorf("client: %v; waited %v, want 1s", err, took)
			}
		})
	})
}
