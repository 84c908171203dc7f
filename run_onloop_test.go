package asyncsteps_test

import (
	"context"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// onLoopInfo is the info of the InternalError of Run (after the method's
// name) called on the goroutine of any Loop.
const onLoopInfo = " called on the goroutine of a Loop: it would block the loop until the flow ends; in a step, wait for the flow with AwaitFlow"

// Two loops whose callbacks each Run a flow of the other's would wait for
// each other for ever, past the deadline of the outer Run too: each Run
// fails at once instead, and both outer flows go on. In a child process,
// so that a hang fails the test.
func TestRunFromTwoLoopsForEachOthersFlowsFails(t *testing.T) {
	inChildFor(t, 10*time.Second, func(t *testing.T) {
		loops := [2]*asyncsteps.Loop{asyncsteps.NewLoop(), asyncsteps.NewLoop()}
		defer loops[0].Close()
		defer loops[1].Close()
		var arrived sync.WaitGroup
		arrived.Add(2)
		var (
			wg   sync.WaitGroup
			errs [2]error
		)
		for i, l := range loops {
			other := loops[1-i]
			outer := asyncsteps.New(asyncsteps.WithTool(l))
			outer.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				inner := asyncsteps.New(asyncsteps.WithTool(other))
				inner.SuccessStep("inner")
				// Both loops are in a callback before either calls Run:
				// the other's loop is busy until its own Run returns.
				arrived.Done()
				arrived.Wait()
				_, err := inner.Run(context.Background())
				as.Success(err)
			})
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				args, err := outer.Run(ctx)
				if err != nil {
					t.Errorf("outer flow %d: %v", i, err)
					return
				}
				errs[i], _ = args[0].(error)
			}()
		}
		wg.Wait()
		for i, err := range errs {
			t.Logf("loop %d", i)
			wantError(t, err, asyncsteps.InternalError, "Run"+onLoopInfo)
		}
	})
}

// With a LoopGroup, a flow made in a step lands on the step's own loop or
// on another by the round robin: Run and RunHelping of it fail the same way
// on either, not at random.
func TestRunOnALoopGroupFailsOnEveryLoop(t *testing.T) {
	g := asyncsteps.NewLoopGroup(2)
	defer g.Close()
	for _, method := range []string{"Run", "RunHelping"} {
		for _, l := range g.Loops() {
			outer := asyncsteps.New(asyncsteps.WithTool(l))
			var (
				errs  []error
				tools = map[asyncsteps.Tool]bool{}
			)
			outer.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
				for range g.Len() {
					inner := g.New()
					inner.SuccessStep("inner")
					tools[inner.Tool()] = true
					var err error
					if method == "Run" {
						_, err = inner.Run(context.Background())
					} else {
						_, err = inner.RunHelping(context.Background())
					}
					errs = append(errs, err)
				}
			})
			if _, err := outer.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if len(tools) != g.Len() {
				t.Fatalf("the inner flows were on %d loops, want %d", len(tools), g.Len())
			}
			for _, err := range errs {
				wantError(t, err, asyncsteps.InternalError, method+onLoopInfo)
			}
		}
	}
}

// An Await function runs on a goroutine of its own, not the loop's: it may
// Run a flow on any loop, its own flow's included, which is what a step
// that must block is told to do.
func TestRunFromAnAwaitFunctionWorks(t *testing.T) {
	g := asyncsteps.NewLoopGroup(2)
	defer g.Close()
	outer := asyncsteps.New(asyncsteps.WithTool(g.Loops()[0]))
	for i, l := range g.Loops() {
		outer.Await(func(ctx context.Context) (any, error) {
			inner := asyncsteps.New(asyncsteps.WithTool(l))
			inner.SuccessStep(i)
			args, err := inner.Run(ctx)
			if err != nil {
				return nil, err
			}
			return args[0], nil
		})
	}
	args, err := outer.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	wantArgs(t, "the last Await's", args, 1)
}

// A callback that takes its goroutine's panic-on-fault setting off (the
// mark of a Loop's goroutine) still may not Run a flow of its own loop.
func TestRunOnItsOwnLoopWithoutTheMarkFails(t *testing.T) {
	l := asyncsteps.NewLoop()
	defer l.Close()
	outer := asyncsteps.New(asyncsteps.WithTool(l))
	var err error
	outer.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		was := debug.SetPanicOnFault(false)
		defer debug.SetPanicOnFault(was)
		inner := asyncsteps.New(asyncsteps.WithTool(l))
		inner.SuccessStep("inner")
		_, err = inner.Run(context.Background())
	})
	if _, err := outer.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantError(t, err, asyncsteps.InternalError, "Run"+onLoopInfo)
}
