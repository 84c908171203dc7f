package asyncsteps_test

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/asyncsteps/asyncsteps"
)

// endingCtx is a context that has not ended when Run starts the flow. A
// Done asked for once the flow has started (as Run begins to wait) blocks
// until end is closed: Run then finds the flow's Result and the context's
// end at once, and takes either.
type endingCtx struct {
	context.Context
	end     chan struct{}
	started func() bool
}

func (c *endingCtx) Done() <-chan struct{} {
	if c.started() {
		<-c.end
	}
	return c.end
}

func (c *endingCtx) Err() error {
	select {
	case <-c.end:
		return context.Canceled
	default:
		return nil
	}
}

// The end of Run's context stops the execution Run started, never a later
// one: once the flow has ended, another goroutine may start the Root again
// before Run has returned (Execute, Promise and Run may be called from any
// goroutine on a Root that is not running), and Run, finding its context
// ended too, must leave that execution alone. Run takes the Result or the
// context's end at random: 32 tries make it take the end nearly surely.
func TestRunContextEndLeavesALaterExecutionAlone(t *testing.T) {
	for _, method := range []string{"Run", "RunHelping"} {
		t.Run(method, func(t *testing.T) {
			loop := asyncsteps.NewLoop()
			defer loop.Close()
			for try := range 32 {
				r := asyncsteps.New(asyncsteps.WithTool(loop))
				began := make(chan struct{})
				r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
					close(began)
					as.Success("first")
				})
				ctx := &endingCtx{Context: context.Background(), end: make(chan struct{}), started: func() bool {
					select {
					case <-began:
						return true
					default:
						return r.Running()
					}
				}}
				ran := make(chan asyncsteps.Result, 1)
				go func() {
					var res asyncsteps.Result
					if method == "Run" {
						res.Args, res.Err = r.Run(ctx)
					} else {
						res.Args, res.Err = r.RunHelping(ctx)
					}
					ran <- res
				}()
				<-began
				for r.Running() { // until the first execution has ended
					runtime.Gosched()
				}
				r.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.WaitExternal() })
				later := r.Promise()
				close(ctx.end)
				wantSuccess(t, <-ran, "first")
				fence(t, loop) // a cancel Run requested has been applied
				select {
				case res := <-later:
					t.Fatalf("try %d: the later execution ended with %v, want it still waiting", try, res.Err)
				default:
				}
				r.Cancel()
				if err := (<-later).Err; !errors.Is(err, context.Canceled) {
					t.Fatalf("try %d: the later execution, cancelled, ended with %v", try, err)
				}
			}
		})
	}
}
