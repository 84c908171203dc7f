package asyncsteps

import (
	"testing"
	"time"
)

// BenchmarkLoopWake measures a goroutine handing a task to an idle Loop, as
// an Await's completion does (inject), and waiting for its answer: the
// loop sleeps untimed between the tasks.
func BenchmarkLoopWake(b *testing.B) { loopWake(b, false) }

// BenchmarkLoopWakeTimed is BenchmarkLoopWake with a step timeout armed
// on the loop, as in a gateway whose waiting steps all have one: every
// sleep of the loop is timed.
func BenchmarkLoopWakeTimed(b *testing.B) { loopWake(b, true) }

func loopWake(b *testing.B, timed bool) {
	l := NewLoop()
	defer l.Close()
	if timed {
		waiting := make(chan AsyncSteps, 1)
		r := New(WithTool(l))
		r.Add(func(as AsyncSteps, _ ...any) {
			as.SetTimeout(time.Hour)
			waiting <- as
		})
		end := r.Promise()
		as := <-waiting
		defer func() {
			as.Success()
			<-end
		}()
	}
	answer := make(chan struct{})
	var task taskFunc = func() { answer <- struct{}{} }
	b.ReportAllocs()
	for b.Loop() {
		l.inject(task)
		<-answer
	}
}
