package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// delivery is a message as a broker hands it over: its body is
// "key:payload"; a body without a key cannot be parsed.
type delivery struct{ ID, Body string }

// broker is a message queue as a consumer sees it. deliveries hands over
// one message at a time, as the consumer takes it: a message not taken
// stays queued (no read-ahead). Each message taken is settled once, by
// ack, nack or dead-letter. cancel stops the deliveries and closes the
// channel, as a broker does when its consumer cancels the subscription.
// Safe for concurrent use.
type broker struct {
	deliveries chan delivery
	stop       chan struct{}
	stopped    chan struct{} // closed once deliveries is
	idle       chan struct{} // closed once every message is settled
	mu         sync.Mutex
	queued     []delivery
	out        map[string]bool     // offered or taken, not settled
	settled    map[string][]string // IDs by outcome, in order
}

func newBroker(msgs ...delivery) *broker {
	b := &broker{deliveries: make(chan delivery), stop: make(chan struct{}), stopped: make(chan struct{}),
		idle: make(chan struct{}), queued: msgs, out: map[string]bool{}, settled: map[string][]string{}}
	go b.feed()
	return b
}

// feed offers the first message queued until it is taken or the
// subscription is cancelled.
func (b *broker) feed() {
	defer close(b.stopped)
	defer close(b.deliveries)
	for {
		b.mu.Lock()
		if len(b.queued) == 0 {
			b.mu.Unlock()
			<-b.stop // a real queue would wait for messages too
			return
		}
		d := b.queued[0]
		b.queued, b.out[d.ID] = b.queued[1:], true // out before the consumer may settle it
		b.mu.Unlock()
		select {
		case b.deliveries <- d:
		case <-b.stop:
			b.mu.Lock()
			b.queued = append([]delivery{d}, b.queued...)
			delete(b.out, d.ID)
			b.mu.Unlock()
			return
		}
	}
}

func (b *broker) cancel() {
	close(b.stop)
	<-b.stopped
}

// settle ends message id's delivery with outcome: "ack", "nack" (queued
// again, for the next consumer) or "dead-letter".
func (b *broker) settle(d delivery, outcome string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.out[d.ID] {
		panic("message " + d.ID + " settled twice")
	}
	delete(b.out, d.ID)
	b.settled[outcome] = append(b.settled[outcome], d.ID)
	if outcome == "nack" {
		b.queued = append(b.queued, d)
	}
	select {
	case <-b.idle:
	default:
		if len(b.out) == 0 && len(b.queued) == 0 {
			close(b.idle)
		}
	}
}

// consumerCounts are a consumer's counters: each message taken ends in one
// of Processed, DeadLettered and Nacked; Retried counts the attempts past
// each message's first.
type consumerCounts struct{ Processed, Retried, DeadLettered, Nacked int }

// services are a message's downstream calls: price and stock, in
// parallel, then store, one at a time per key. Each honours its context.
type services struct {
	price, stock func(ctx context.Context, key string) (string, error)
	store        func(ctx context.Context, key, value string) error
}

// consumer runs every message of a broker as an item of one flow, at most
// 16 at once, each within its budget, its calls retried on transient
// failures; Shutdown drains it.
type consumer struct {
	loop   *asyncsteps.Loop
	b      *broker
	svc    services
	budget time.Duration
	logf   func(format string, args ...any)
	keys   *asyncsteps.KeyedMutex[string] // one store at a time per key
	result <-chan asyncsteps.Result
	root   *asyncsteps.Root
	counts consumerCounts // written on the loop only
	// inFlight counts the messages taken and not settled, on the loop;
	// maxInFlight is the most at once.
	inFlight, maxInFlight int
	mu                    sync.Mutex
	running               map[string]int // Await functions running, by message: for the report
}

func startConsumer(b *broker, svc services, budget time.Duration, logf func(string, ...any)) *consumer {
	c := &consumer{loop: asyncsteps.NewLoop(), b: b, svc: svc, budget: budget, logf: logf,
		keys: asyncsteps.NewKeyedMutex[string](1), running: map[string]int{}}
	c.root = asyncsteps.New(asyncsteps.WithTool(c.loop))
	asyncsteps.ForEachChan(c.root, b.deliveries, 16, c.handle) // takes a message only for a free slot
	c.result = c.root.Promise()
	return c
}

// handle is a message's item: each message taken ends in one settle,
// an ack by its last step, a dead-letter by the handler that recovers
// from every error, or a nack by the cancel handler of the step around
// them, which only the shutdown's cancel reaches.
func (c *consumer) handle(as asyncsteps.AsyncSteps, d delivery) {
	c.inFlight++
	c.maxInFlight = max(c.maxInFlight, c.inFlight)
	key, payload, ok := strings.Cut(d.Body, ":")
	if !ok || key == "" {
		c.settle(d, "dead-letter", "unparsable") // poison: at once, never retried
		return
	}
	as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetCancel(func(asyncsteps.AsyncSteps) { c.settle(d, "nack", "shutdown") })
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(c.budget)
			asyncsteps.Retry(as, asyncsteps.RetryOptions{
				Attempts: 4, // 3 retries
				Timeout:  200 * time.Millisecond,
				Backoff:  func(n int) time.Duration { return time.Duration(n) * 10 * time.Millisecond },
			}, func(as asyncsteps.AsyncSteps, attempt int) {
				if attempt > 0 {
					c.counts.Retried++
				}
				c.process(as, d.ID, key, payload)
			})
			as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { c.settle(d, "ack", "") })
		}, func(as asyncsteps.AsyncSteps, code string) {
			c.settle(d, "dead-letter", strings.TrimSpace(code+" "+as.State().ErrorInfo))
			as.Success()
		})
	})
}

// process is an attempt: price and stock in parallel, then the store
// under the key's lock (a store that fails calls price and stock again).
func (c *consumer) process(as asyncsteps.AsyncSteps, id, key, payload string) {
	asyncsteps.Gather(as, func(as asyncsteps.AsyncSteps, v []string) {
		c.keys.Sync(as, key, func(as asyncsteps.AsyncSteps, _ ...any) {
			as.Await(tracked(c, id, func(ctx context.Context) (any, error) {
				return nil, c.svc.store(ctx, key, payload+" "+strings.Join(v, " "))
			}))
		})
	}, func(as asyncsteps.AsyncSteps) {
		asyncsteps.AwaitThen(as, tracked(c, id, func(ctx context.Context) (string, error) { return c.svc.price(ctx, key) }), nil)
	}, func(as asyncsteps.AsyncSteps) {
		asyncsteps.AwaitThen(as, tracked(c, id, func(ctx context.Context) (string, error) { return c.svc.stock(ctx, key) }), nil)
	})
}

// tracked counts fn in c.running while it runs, for Shutdown's report.
func tracked[T any](c *consumer, id string, fn func(context.Context) (T, error)) func(context.Context) (T, error) {
	return func(ctx context.Context) (T, error) {
		c.mu.Lock()
		c.running[id]++
		c.mu.Unlock()
		defer func() {
			c.mu.Lock()
			if c.running[id]--; c.running[id] == 0 {
				delete(c.running, id)
			}
			c.mu.Unlock()
		}()
		return fn(ctx)
	}
}

// settle counts a message's outcome and settles it with the broker, on
// the loop.
func (c *consumer) settle(d delivery, outcome, why string) {
	c.inFlight--
	switch outcome {
	case "ack":
		c.counts.Processed++
	case "nack":
		c.counts.Nacked++
	default:
		c.counts.DeadLettered++
	}
	c.b.settle(d, outcome)
	c.logf("%s %s", d.ID, strings.TrimSpace(outcome+" "+why))
}

// Shutdown stops taking messages, gives those in flight grace to end,
// cancels the rest (nacked), closes the loop and waits at most wait for
// the Await functions still running. Its error names the messages whose
// functions outlived wait.
//
// The subscription is cancelled first: ForEachChan sees the channel
// closed once a slot is free, and ends once the messages in flight have.
// A cancel of the flow while ForEachChan's goroutine waits on the channel
// would drop a message that goroutine received as the cancel came: it
// would be neither acked nor nacked. The loop is closed once the flow has
// ended: a flow that a closing loop stops runs no cancel handler, so
// nacks nothing.
func (c *consumer) Shutdown(grace, wait time.Duration) (consumerCounts, error) {
	c.b.cancel()
	var res asyncsteps.Result
	select {
	case res = <-c.result:
	case <-time.After(grace):
		c.root.Cancel()
		res = <-c.result
	}
	if errors.Is(res.Err, context.Canceled) {
		res.Err = nil // the cancel after grace
	}
	c.loop.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := c.loop.Wait(ctx); err != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		res.Err = errors.Join(res.Err, fmt.Errorf("Await functions still running after %v: %v", wait, c.running))
	}
	return c.counts, res.Err
}

// A queue consumer: the messages of a broker as the items of one flow,
// 16 at most in flight, each taken only for a free slot; per message, two
// calls in parallel then a store under a lock of its key, retried on
// transient failures within the message's budget; a graceful shutdown
// that knows no call of a cancelled message still runs. Here m2 cannot be
// parsed and is dead-lettered at once, m3's price fails once and is
// retried, m1 and m4 share a key, so their stores run one after the
// other; Shutdown finds nothing in flight. consumer_cases_test.go tests
// the hard cases on virtual time: the bound, the retries, the budget, a
// key's stores, a shutdown with calls cancelled or ignoring their
// context.
func Example_consumer() {
	b := newBroker(delivery{"m1", "a:1"}, delivery{"m2", "oops"}, delivery{"m3", "b:2"}, delivery{"m4", "a:3"})
	var mu sync.Mutex
	failed := map[string]bool{}
	stored := map[string][]string{}
	c := startConsumer(b, services{
		price: func(ctx context.Context, key string) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			if key == "b" && !failed[key] {
				failed[key] = true
				return "", &asyncsteps.Error{Code: asyncsteps.CommError, Info: "price service unavailable"}
			}
			return "price-" + key, nil
		},
		stock: func(ctx context.Context, key string) (string, error) { return "stock-" + key, nil },
		store: func(ctx context.Context, key, value string) error {
			mu.Lock()
			defer mu.Unlock()
			stored[key] = append(stored[key], value)
			return nil
		},
	}, time.Second, func(string, ...any) {})
	<-b.idle
	counts, err := c.Shutdown(time.Second, time.Second)
	fmt.Printf("%+v %v\n", counts, err)
	for _, outcome := range slices.Sorted(maps.Keys(b.settled)) {
		fmt.Println(outcome, slices.Sorted(slices.Values(b.settled[outcome])))
	}
	fmt.Printf("stores: a %d, b %q\n", len(stored["a"]), stored["b"])
	// Output:
	// {Processed:3 Retried:1 DeadLettered:1 Nacked:0} <nil>
	// ack [m1 m3 m4]
	// dead-letter [m2]
	// stores: a 2, b ["2 price-b stock-b"]
}
