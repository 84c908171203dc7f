package asyncsteps

import (
	"fmt"
	"runtime"
	"slices"
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

// liveHeap returns the bytes of the live heap, after a collection.
func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// Keys seen once cost nothing afterwards: once a burst of keys in use at
// once has been let go of, the room the map grew for them goes back too
// (a Go map never shrinks by itself), so that a KeyedMutex costs what the
// keys in use need, not what its busiest moment did. The keys are taken
// and let go of as sections do, without flows.
func TestKeyedMutexGivesBackTheRoomOfABurst(t *testing.T) {
	const burst = 1 << 16
	km := NewKeyedMutex[string](1)
	names := make([]string, burst)
	for i := range names {
		names[i] = fmt.Sprint("user-", i)
	}
	base := liveHeap()
	locks := make([]*keyLock[string], burst)
	for i, name := range names {
		locks[i], _ = km.acquire(name)
	}
	const held = 64 // keys still in use after the burst
	for _, k := range locks[held:] {
		km.release(k)
	}
	locks = slices.Clone(locks[:held]) // not the burst's array, which reaches every key
	// The map of a burst keeps some 50 bytes a key of it; the keys still
	// in use need far less than 4 (the heap's own noise included).
	if kept := liveHeap() - base; kept > 4*burst {
		t.Errorf("after a burst of %d keys, %d in use, the KeyedMutex keeps %d bytes", burst, held, kept)
	}
	if n := km.Len(); n != held {
		t.Errorf("%d keys in use, want %d", n, held)
	}
	for _, k := range locks {
		km.release(k)
	}
	if n := km.Len(); n != 0 {
		t.Errorf("%d keys in use at the end, want 0", n)
	}
	runtime.KeepAlive(km)
	runtime.KeepAlive(names)
}
