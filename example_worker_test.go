package asyncsteps_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// queuedJob is a message of the queue.
type queuedJob struct {
	ID, Tenant string
	Delivery   int // 1 at the first delivery: the queue counts them
}

// queue is an in-memory job queue with leases, as a message broker or a
// jobs table gives: pull leases jobs, and each job leased ends in one of
// ack (done), nack (failed: delivered again, or dead-lettered after
// maxDeliveries) or release (not begun: back, its delivery not counted).
// It is touched on the worker's loop only, so it needs no lock.
type queue struct {
	ready         []queuedJob
	leased        map[string]queuedJob
	done, dead    []string
	maxDeliveries int
}

func newQueue(maxDeliveries int, jobs ...queuedJob) *queue {
	return &queue{ready: jobs, leased: map[string]queuedJob{}, maxDeliveries: maxDeliveries}
}

func (q *queue) pull(n int) []queuedJob {
	batch := slices.Clone(q.ready[:min(max(n, 0), len(q.ready))])
	q.ready = q.ready[len(batch):]
	for i := range batch {
		batch[i].Delivery++
		q.leased[batch[i].ID] = batch[i]
	}
	return batch
}

// settle ends j's lease: outcome is "ack", "nack" or "release".
func (q *queue) settle(j queuedJob, outcome string) {
	if _, ok := q.leased[j.ID]; !ok {
		panic("job " + j.ID + " settled twice") // processed twice: the bug a worker must not have
	}
	delete(q.leased, j.ID)
	switch {
	case outcome == "ack":
		q.done = append(q.done, j.ID)
	case outcome == "nack" && j.Delivery >= q.maxDeliveries:
		q.dead = append(q.dead, j.ID)
	case outcome == "release":
		j.Delivery--
		fallthrough
	default:
		q.ready = append(q.ready, j)
	}
}

// call is one request to a downstream service for a job: it adds the
// request's steps to as (in production an as.Await of an HTTP client's
// call; in tests a fake on the tool's virtual clock).
type call func(as asyncsteps.AsyncSteps, j queuedJob)

// worker runs each job leased from q as a flow: one job at a time per
// tenant, at most Concurrent jobs and Rate starts a Period over all
// tenants, two downstream calls each retried with a backoff, the whole
// job within its lease. Its methods run on the loop: from another
// goroutine, through tool.Immediate.
type worker struct {
	tool           asyncsteps.Tool
	q              *queue
	tenants        *asyncsteps.KeyedMutex[string]
	limit          *asyncsteps.Limiter
	billing, email call
	lease          time.Duration
	logf           func(format string, args ...any)

	flows    map[string]*asyncsteps.Root // the jobs leased, by ID
	begun    map[string]bool             // those past the tenant lock and the limiter
	poller   asyncsteps.Handle
	grace    asyncsteps.Handle
	draining bool
}

func newWorker(tool asyncsteps.Tool, q *queue, billing, email call, logf func(string, ...any)) *worker {
	return &worker{
		tool:    tool,
		q:       q,
		tenants: asyncsteps.NewKeyedMutex[string](1),
		limit: asyncsteps.NewLimiter(asyncsteps.LimiterOptions{
			Concurrent: 2, MaxQueue: asyncsteps.Unlimited,
			Rate: 10, Period: time.Second, Burst: asyncsteps.Unlimited,
		}),
		billing: billing,
		email:   email,
		lease:   time.Second,
		logf:    logf,
		flows:   map[string]*asyncsteps.Root{},
		begun:   map[string]bool{},
	}
}

// poll takes jobs now and then every period, until drain.
func (w *worker) poll(maxJobs int, every time.Duration) {
	w.take(maxJobs)
	w.poller = w.tool.Deferred(every, func() { w.poll(maxJobs, every) })
}

// take leases up to maxJobs jobs less those in flight, and starts them.
func (w *worker) take(maxJobs int) {
	for _, j := range w.q.pull(maxJobs - len(w.flows)) {
		w.start(j)
	}
}

func (w *worker) start(j queuedJob) {
	r := asyncsteps.New(asyncsteps.WithTool(w.tool))
	w.flows[j.ID] = r
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		// The lease counts from the pull, the waits for the locks
		// included; past it the job's steps are cancelled.
		as.SetTimeout(w.lease)
		// The tenant lock first: a job waiting for its tenant holds
		// none of the Limiter's slots.
		w.tenants.Sync(as, j.Tenant, func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Sync(w.limit, func(as asyncsteps.AsyncSteps, _ ...any) { w.process(as, j) })
		})
	})
	// Once the flow has stopped, however it ended. Its locks are given
	// back by then, but those that an Await call of the job still holds:
	// a call that ignores its context keeps them until it returns.
	r.ExecuteThen(func(res asyncsteps.Result) { w.end(j, res.Err) })
}

func (w *worker) process(as asyncsteps.AsyncSteps, j queuedJob) {
	w.begun[j.ID] = true
	w.logf("%s begins, delivery %d", j.ID, j.Delivery)
	w.retry(as, "billing", w.billing, j)
	w.retry(as, "email", w.email, j)
}

// retry makes c, 3 attempts of 50ms at most, 20ms and 40ms apart, and
// names the service in the info of its last failure.
func (w *worker) retry(as asyncsteps.AsyncSteps, service string, c call, j queuedJob) {
	as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		asyncsteps.Retry(as, asyncsteps.RetryOptions{
			Attempts: 3,
			Timeout:  50 * time.Millisecond,
			Backoff:  func(n int) time.Duration { return time.Duration(n) * 20 * time.Millisecond },
		}, func(as asyncsteps.AsyncSteps, attempt int) { c(as, j) })
	}, func(as asyncsteps.AsyncSteps, code string) {
		as.Error(code, strings.TrimSuffix(service+": "+as.State().ErrorInfo, ": "))
	})
}

// end settles a job's lease, once, whichever way its flow ended: acked
// on a success, else nacked if it had begun, released (its delivery not
// counted) if it had not.
func (w *worker) end(j queuedJob, err error) {
	outcome, failure := "ack", ""
	var e *asyncsteps.Error
	switch {
	case errors.As(err, &e):
		failure = strings.TrimSpace(e.Code + " " + e.Info) // the lease's Timeout too
	case err != nil:
		failure = "drained" // the drain's cancel
	}
	switch {
	case failure != "" && w.begun[j.ID]:
		outcome = "nack"
	case failure != "":
		outcome = "release"
	}
	delete(w.flows, j.ID)
	delete(w.begun, j.ID)
	w.q.settle(j, outcome)
	w.logf("%s %s", j.ID, strings.TrimSuffix(outcome+": "+failure, ": "))
	w.drained()
}

// drain stops polling, releases the jobs that have not begun, and gives
// those in flight grace to end before it cancels them too.
func (w *worker) drain(grace time.Duration) {
	w.draining = true
	if w.poller != nil {
		w.poller.Cancel()
	}
	w.logf("draining %d jobs", len(w.flows))
	for _, id := range slices.Sorted(maps.Keys(w.flows)) {
		if !w.begun[id] {
			w.flows[id].Cancel()
		}
	}
	w.grace = w.tool.Deferred(grace, func() {
		for _, id := range slices.Sorted(maps.Keys(w.flows)) {
			w.flows[id].Cancel()
		}
	})
	w.drained()
}

func (w *worker) drained() {
	if w.draining && len(w.flows) == 0 {
		w.grace.Cancel()
		w.logf("drained")
	}
}

// fake is a downstream service on the tool's virtual clock: each call
// answers after 30ms, with the next code scripted for its job ("" is a
// success, "hang" never answers).
func fake(script map[string][]string) call {
	return func(as asyncsteps.AsyncSteps, j queuedJob) {
		var code string
		if s := script[j.ID]; len(s) > 0 {
			code, script[j.ID] = s[0], s[1:]
		}
		if code == "hang" {
			as.WaitExternal()
			return
		}
		asyncsteps.Sleep(as, 30*time.Millisecond) // a timeout, the lease, the drain stop it
		if code != "" {
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error(code, "failed") })
		}
	}
}

// A background worker on virtual time: five jobs of three tenants, two at
// a time and one at a time per tenant. b1's billing fails once and is
// retried. The drain at 150ms releases a3, which waits behind a2 for
// tenant A, lets a2 end within the 50ms of grace, and cancels c1, still
// retrying billing, at the end of it: c1 goes back, its delivery counted.
func Example_worker() {
	tt := asyncsteps.NewTestTool()
	q := newQueue(2, queuedJob{"a1", "A", 0}, queuedJob{"b1", "B", 0}, queuedJob{"a2", "A", 0},
		queuedJob{"c1", "C", 0}, queuedJob{"a3", "A", 0})
	billing := fake(map[string][]string{"b1": {"CommError"}, "c1": {"CommError", "CommError", "CommError"}})
	w := newWorker(tt, q, billing, fake(nil), func(format string, args ...any) {
		fmt.Printf("%v: "+format+"\n", append([]any{tt.Now().Sub(asyncsteps.TestToolEpoch)}, args...)...)
	})
	w.poll(4, 100*time.Millisecond)
	tt.Deferred(150*time.Millisecond, func() { w.drain(50 * time.Millisecond) })
	tt.Run()
	fmt.Println("done", q.done, "dead", q.dead, "ready", q.ready)
	// Output:
	// 0s: a1 begins, delivery 1
	// 0s: b1 begins, delivery 1
	// 60ms: c1 begins, delivery 1
	// 60ms: a1 ack
	// 110ms: a2 begins, delivery 1
	// 110ms: b1 ack
	// 150ms: draining 3 jobs
	// 150ms: a3 release: drained
	// 170ms: a2 ack
	// 200ms: c1 nack: drained
	// 200ms: drained
	// done [a1 b1 a2] dead [] ready [{a3 A 0} {c1 C 1}]
}
