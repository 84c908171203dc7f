package otelsteps

import (
	"strings"
	"testing"
)

// A stack over the cap is cut after its last whole line that fits with
// the ellipsis line; a cap too small for a whole line cuts as an info is
// cut; no cap, or a stack within it, leaves it whole.
func TestCutStack(t *testing.T) {
	stack := []byte("goroutine 1 [running]:\nmain.f()\n\t/x/main.go:3\n")
	for _, c := range []struct {
		max  int
		want string
	}{
		{0, string(stack)},
		{len(stack), string(stack)},
		{len(stack) - 1, "goroutine 1 [running]:\nmain.f()\n…"},
		{35, "goroutine 1 [running]:\nmain.f()\n…"},
		{34, "goroutine 1 [running]:\n…"},
		{26, "goroutine 1 [running]:\n…"},
		{25, "goroutine 1 [running]:…"},
		{3, "gor"},
		{1, "g"},
	} {
		if got := cutStack(stack, c.max); got != c.want || (c.max > 0 && len(got) > c.max) {
			t.Errorf("cutStack(%d) = %q, want %q", c.max, got, c.want)
		}
	}
}

// A stack that is not valid UTF-8 (a file name) is exported with each run
// of bad bytes made a U+FFFD, which OTLP's protobuf encoding requires; the
// 2 bytes that adds to its 3 count in the cap.
func TestCutStackNotUTF8(t *testing.T) {
	stack := []byte("goroutine 1 [running]:\nmain.f()\n\t/x/\xffmain.go:3\n")
	valid := "goroutine 1 [running]:\nmain.f()\n\t/x/\uFFFDmain.go:3\n"
	for _, c := range []struct {
		max  int
		want string
	}{
		{0, valid},
		{len(stack) + 2, valid},
		{len(stack) + 1, "goroutine 1 [running]:\nmain.f()\n…"},
		{3, "gor"},
	} {
		if got := cutStack(stack, c.max); got != c.want || (c.max > 0 && len(got) > c.max) {
			t.Errorf("cutStack(%d) = %q, want %q", c.max, got, c.want)
		}
	}
}

// The cap counts the bytes of a stack as exported, once each run of bad
// bytes is made a U+FFFD: a run across the cap's edge that leaves the
// stack within it keeps what follows the run. Before, the cap counted
// the bytes as raised: such a stack was cut after its last line.
func TestCutStackCountsTheStackAsExported(t *testing.T) {
	stack := []byte("main.f()\n" + strings.Repeat("\xff", 20) + "x\n")
	for max, want := range map[int]string{
		14: "main.f()\n\uFFFDx\n",
		13: "main.f()\n…",
	} {
		if got := cutStack(stack, max); got != want {
			t.Errorf("cutStack(%d) = %q, want %q", max, got, want)
		}
	}
}

// A cap that ends in the middle of a stack's character leaves it out: the
// bytes kept of it are no bad bytes, to be made a U+FFFD.
func TestCutStackInACharacter(t *testing.T) {
	stack := []byte("\U0001F525 goroutine 1 [running]:\n")
	for max, want := range map[int]string{1: "", 2: "", 3: "", 4: "…", 7: "\U0001F525…"} {
		if got := cutStack(stack, max); got != want {
			t.Errorf("cutStack(%d) = %q, want %q", max, got, want)
		}
	}
}

// A valid stack over the cap, the common case of a deep recursion's, is
// copied once, into the string exported, when it is cut after a line. Before, the part the cap keeps was copied first, to be made valid
// UTF-8 if it was not, and the cut of it a second time: twice the bytes,
// up to the cap, at every panic of a deep stack.
func TestCutStackCopiesAValidStackOnce(t *testing.T) {
	line := "main.recurse(...)\n\t/src/main.go:12 +0x1d\n"
	stack := []byte("goroutine 1 [running]:\n" + strings.Repeat(line, 1000))
	for _, max := range []int{DefaultMaxStackBytes, 100} {
		if n := testing.AllocsPerRun(100, func() { cutStack(stack, max) }); n != 1 {
			t.Errorf("cutStack(%d): %v allocations, want 1", max, n)
		}
	}
}
