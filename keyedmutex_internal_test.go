package asyncsteps

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A flow that comes for a key as its last holder leaves, after the holder
// gave the slot back but before it let go of the key, finds the key's
// Mutex still in use and enters it; the key stays in use for it when the
// holder lets go, so a third flow waits for it instead of making a Mutex
// of its own (two holders of one key), and the key is freed once both have
// left. The newcomer runs on another tool, as a flow of another Loop would.
func TestKeyedMutexFlowComingAsTheKeyIsFreed(t *testing.T) {
	holderTool, tt := NewTestTool(), NewTestTool()
	km := NewKeyedMutex[string](1)
	var trace []string
	note := func(format string, args ...any) { trace = append(trace, fmt.Sprintf(format, args...)) }
	var bHeld AsyncSteps
	b := New(WithTool(tt))
	km.Sync(b, "a", func(as AsyncSteps, _ ...any) {
		note("B in, %d key", km.Len())
		bHeld = as
		as.WaitExternal()
	})
	c := New(WithTool(tt))
	km.Sync(c, "a", func(as AsyncSteps, _ ...any) { note("C in") })

	a := New(WithTool(holderTool))
	km.Sync(a, "a", func(as AsyncSteps, _ ...any) { note("A in") })
	onceHook(t, &testHookKeyLeft, func() {
		note("A left the Mutex")
		b.Execute()
		tt.Advance(0)
	})
	aRes := a.Promise()
	holderTool.Run()
	note("A let go, %d key", km.Len())
	cRes := c.Promise()
	tt.Advance(time.Millisecond)
	note("B leaves")
	bHeld.Success()
	tt.Run()
	note("%d key", km.Len())

	want := "A in,A left the Mutex,B in, 1 key,A let go, 1 key,B leaves,C in,0 key"
	if got := strings.Join(trace, ","); got != want {
		t.Errorf("trace\n got: %s\nwant: %s", got, want)
	}
	for _, res := range []<-chan Result{aRes, cRes} {
		if r := <-res; r.Err != nil {
			t.Errorf("flow ended with %v", r.Err)
		}
	}
}
