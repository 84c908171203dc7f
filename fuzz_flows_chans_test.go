package asyncsteps_test

// The channels of FuzzFlows' AwaitChan and AwaitResult steps.

import (
	"context"

	"github.com/asyncsteps/asyncsteps"
	ff "github.com/asyncsteps/asyncsteps/internal/flowfuzz"
)

// sharedChan is the channel of an AwaitChan (ints) or AwaitResult
// (results) step that the Root and its clone share.
type sharedChan struct {
	n       *ff.Node
	ints    chan int
	results chan asyncsteps.Result
	closed  bool
}

// armShared empties the channels of the steps added before the run and
// sends to them, or closes them, as their nodes say, from the start of the
// run, as if the steps had been added then.
func (x *flowRun) armShared() {
	for _, c := range x.shared {
		if !c.closed {
			select {
			case <-c.ints: // a value sent after its step was cancelled
			case <-c.results:
			default:
			}
		}
		x.armChan(c)
	}
}

// armChan sends a channel its value, or closes it, now (Ready) or At ms
// later.
func (x *flowRun) armChan(c *sharedChan) {
	n := c.n
	if n.NilChan || n.End == ff.EWait {
		return
	}
	send := func() {
		switch {
		case n.Closed && c.closed:
		case n.Closed:
			c.closed = true
			if c.ints != nil {
				close(c.ints)
			} else {
				close(c.results)
			}
		case c.ints != nil:
			c.ints <- n.Args[0]
		default:
			c.results <- chanResult(n)
		}
	}
	if n.Ready {
		send()
		return
	}
	x.handles = append(x.handles, x.tt.Deferred(ms(n.At), send))
}

// chanResult is the Result the AwaitResult n receives.
func chanResult(n *ff.Node) asyncsteps.Result {
	switch {
	case n.End == ff.EExternal:
		return asyncsteps.Result{Args: intArgs(n.Args)}
	case n.Code == "Timeout":
		return asyncsteps.Result{Err: context.DeadlineExceeded}
	case n.Code == asyncsteps.InternalError:
		return asyncsteps.Result{Err: context.Canceled}
	}
	return asyncsteps.Result{Err: &asyncsteps.Error{Code: n.Code, Info: n.Info}}
}

// channel makes the channel of the AwaitChan or AwaitResult n, added now:
// nil for a NilChan; one added before the first run is shared with the
// clone's (see armShared).
func (x *flowRun) channel(n *ff.Node) *sharedChan {
	c := &sharedChan{n: n}
	if n.NilChan {
		return c
	}
	if n.Await == ff.AwaitChan {
		c.ints = make(chan int, 1)
	} else {
		c.results = make(chan asyncsteps.Result, 1)
	}
	if x.gen == 0 {
		x.shared = append(x.shared, c)
		x.noClone = x.noClone || n.Closed && !n.Ready
		return c
	}
	x.armChan(c)
	return c
}
