package asyncsteps_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// The hard cases of Example_consumer, each on a Loop in a testing/synctest
// bubble: the downstream calls are Await functions on goroutines, and the
// bubble's clock moves once they and the loop wait.

// scriptedCall is one call of a fake downstream service: it answers after d
// with err (nil: a value), or returns ctx's error if ctx ends first,
// unless deaf: then it ignores ctx until d has passed.
type scriptedCall struct {
	d    time.Duration
	err  error
	deaf bool
}

// downstream fakes the three services; each call takes the next call
// scriptedCall for "service key", else answers at once. It logs the calls
// of the services named in logged, and tracks how many price calls run.
type downstream struct {
	mu       sync.Mutex
	start    time.Time
	script   map[string][]scriptedCall
	logged   map[string]bool
	log      []string
	returned []string // "service key" of each deaf call, as it returns
}

func newDownstream(script map[string][]scriptedCall, logged ...string) *downstream {
	f := &downstream{start: time.Now(), script: script, logged: map[string]bool{}}
	for _, s := range logged {
		f.logged[s] = true
	}
	return f
}

func (f *downstream) call(ctx context.Context, service, key string) (string, error) {
	name := service + " " + key
	f.mu.Lock()
	var s scriptedCall
	if calls := f.script[name]; len(calls) > 0 {
		s, f.script[name] = calls[0], calls[1:]
	}
	f.logf(service, "%s begins", name)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.logf(service, "%s ends", name)
		if s.deaf {
			f.returned = append(f.returned, name)
		}
	}()
	switch {
	case s.d == 0:
	case s.deaf:
		time.Sleep(s.d)
	default:
		select {
		case <-time.After(s.d):
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return service + "-" + key, s.err
}

// logf logs for service, with f.mu held.
func (f *downstream) logf(service, format string, args ...any) {
	if f.logged[service] {
		f.log = append(f.log, fmt.Sprintf("%v ", time.Since(f.start))+fmt.Sprintf(format, args...))
	}
}

func (f *downstream) services() services {
	return services{
		price: func(ctx context.Context, key string) (string, error) { return f.call(ctx, "price", key) },
		stock: func(ctx context.Context, key string) (string, error) { return f.call(ctx, "stock", key) },
		store: func(ctx context.Context, key, _ string) error { _, err := f.call(ctx, "store", key); return err },
	}
}

// consumerLog collects a consumer's settlements with their times.
type consumerLog struct {
	mu    sync.Mutex
	start time.Time
	lines []string
}

func (l *consumerLog) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf("%v ", time.Since(l.start))+fmt.Sprintf(format, args...))
}

func (l *consumerLog) want(t *testing.T, want ...string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !slices.Equal(l.lines, want) {
		t.Errorf("settlements:\n%s\nwant:\n%s", strings.Join(l.lines, "\n"), strings.Join(want, "\n"))
	}
}

// onLoop runs f on c's loop and waits for it: c's counters are the loop's.
func onLoop(c *consumer, f func()) {
	done := make(chan struct{})
	c.loop.Immediate(func() { f(); close(done) })
	<-done
}

func messages(prefix string, n int) []delivery {
	var ds []delivery
	for i := range n {
		ds = append(ds, delivery{fmt.Sprintf("%s%d", prefix, i), fmt.Sprintf("%s%d:x", prefix, i)})
	}
	return ds
}

func wantCounts(t *testing.T, got consumerCounts, err error, want consumerCounts) {
	t.Helper()
	if got != want || err != nil {
		t.Errorf("Shutdown: %+v, %v; want %+v, <nil>", got, err, want)
	}
}

// Forty messages: the consumer takes 16, and the next one only as one of
// them ends; the broker keeps the others (the 17th offered, not taken).
func TestConsumerTakesAMessageOnlyForAFreeSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		script := map[string][]scriptedCall{}
		for i := range 40 {
			script[fmt.Sprintf("price k%d", i)] = []scriptedCall{{d: time.Duration(100+i) * time.Millisecond}}
		}
		b := newBroker(messages("k", 40)...)
		c := startConsumer(b, newDownstream(script).services(), time.Second, func(string, ...any) {})
		inFlight := func() (n, queued int) {
			onLoop(c, func() { n = c.inFlight })
			b.mu.Lock()
			defer b.mu.Unlock()
			return n, len(b.queued)
		}
		time.Sleep(50 * time.Millisecond)
		synctest.Wait()
		if n, queued := inFlight(); n != 16 || queued != 40-17 {
			t.Errorf("at 50ms: %d in flight, %d queued; want 16, 23 (and one offered)", n, queued)
		}
		time.Sleep(50500 * time.Microsecond) // k0 has ended at 100ms, k16 has begun
		synctest.Wait()
		if n, queued := inFlight(); n != 16 || queued != 40-18 {
			t.Errorf("at 100.5ms: %d in flight, %d queued; want 16, 22", n, queued)
		}
		<-b.idle
		counts, err := c.Shutdown(time.Second, time.Second)
		wantCounts(t, counts, err, consumerCounts{Processed: 40})
		if c.maxInFlight != 16 {
			t.Errorf("%d messages in flight at most, want 16", c.maxInFlight)
		}
	})
}

// A poison message is dead-lettered at once; a transient failure is
// retried after 10ms, then 20ms; one that stays is retried 3 times, then
// dead-lettered; a permanent one is not retried.
func TestConsumerRetriesTransientFailuresOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		down := func(info string) error { return &asyncsteps.Error{Code: asyncsteps.CommError, Info: info} }
		f := newDownstream(map[string][]scriptedCall{
			"price r": {{d: 10 * time.Millisecond, err: down("price down")}, {d: 10 * time.Millisecond, err: down("price down")}, {d: 10 * time.Millisecond}},
			"stock x": slices.Repeat([]scriptedCall{{d: 10 * time.Millisecond, err: down("stock down")}}, 4),
			"price i": {{d: 15 * time.Millisecond, err: &asyncsteps.Error{Code: asyncsteps.InvalidRequest, Info: "no such item"}}},
		}, "price")
		log := &consumerLog{start: time.Now()}
		b := newBroker(delivery{"p", "no key"}, delivery{"r", "r:1"}, delivery{"x", "x:1"}, delivery{"i", "i:1"})
		c := startConsumer(b, f.services(), time.Second, log.logf)
		<-b.idle
		counts, err := c.Shutdown(time.Second, time.Second)
		wantCounts(t, counts, err, consumerCounts{Processed: 1, Retried: 2 + 3, DeadLettered: 3})
		log.want(t,
			"0s p dead-letter unparsable",
			"15ms i dead-letter InvalidRequest no such item",
			"60ms r ack", // attempts at 0, 20ms and 50ms
			"100ms x dead-letter CommError stock down", // attempts at 0, 20ms, 50ms and 90ms
		)
		var rPrices []string
		for _, l := range f.log {
			if strings.Contains(l, "price r begins") {
				rPrices = append(rPrices, strings.Fields(l)[0])
			}
		}
		if want := []string{"0s", "20ms", "50ms"}; !slices.Equal(rPrices, want) {
			t.Errorf("r's price calls began at %v, want %v", rPrices, want)
		}
	})
}

// The budget bounds a message's attempts and backoffs together: its
// Timeout is no attempt's, so it is not retried.
func TestConsumerBudgetEndsTheRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newDownstream(map[string][]scriptedCall{"price s": slices.Repeat([]scriptedCall{{d: time.Second}}, 4)}, "price")
		log := &consumerLog{start: time.Now()}
		b := newBroker(delivery{"s", "s:1"})
		c := startConsumer(b, f.services(), 500*time.Millisecond, log.logf)
		<-b.idle
		counts, err := c.Shutdown(time.Second, time.Second)
		wantCounts(t, counts, err, consumerCounts{Retried: 2, DeadLettered: 1})
		log.want(t, "500ms s dead-letter Timeout")
		want := []string{ // each attempt times out at 200ms, is retried 10ms, then 20ms later
			"0s price s begins", "200ms price s ends",
			"210ms price s begins", "410ms price s ends",
			"430ms price s begins", "500ms price s ends",
		}
		if !slices.Equal(f.log, want) {
			t.Errorf("price calls:\n%s\nwant:\n%s", strings.Join(f.log, "\n"), strings.Join(want, "\n"))
		}
	})
}

// Two messages of key k store one after the other; j's store runs beside
// them.
func TestConsumerStoresOneMessageAtATimePerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newDownstream(map[string][]scriptedCall{
			"store k": {{d: 50 * time.Millisecond}, {d: 50 * time.Millisecond}},
			"store j": {{d: 30 * time.Millisecond}},
		}, "store")
		b := newBroker(delivery{"k1", "k:1"}, delivery{"k2", "k:2"}, delivery{"j1", "j:1"})
		log := &consumerLog{start: time.Now()}
		c := startConsumer(b, f.services(), time.Second, log.logf)
		<-b.idle
		counts, err := c.Shutdown(time.Second, time.Second)
		wantCounts(t, counts, err, consumerCounts{Processed: 3})
		var k []string
		for _, l := range f.log {
			if strings.Contains(l, "store k") {
				k = append(k, l)
			}
		}
		want := []string{"0s store k begins", "50ms store k ends", "50ms store k begins", "100ms store k ends"}
		if !slices.Equal(k, want) {
			t.Errorf("stores of k:\n%s\nwant:\n%s", strings.Join(k, "\n"), strings.Join(want, "\n"))
		}
		if !slices.Contains(f.log, "0s store j begins") {
			t.Errorf("j's store did not begin at once: %q", f.log)
		}
		log.mu.Lock()
		defer log.mu.Unlock()
		if got := fmt.Sprint(log.lines); got != "[30ms j1 ack 50ms k1 ack 100ms k2 ack]" && got != "[30ms j1 ack 50ms k2 ack 100ms k1 ack]" {
			t.Errorf("settlements %s: want j1 at 30ms, one of k at 50ms, the other at 100ms", got)
		}
	})
}

// Shutdown at 50ms with 150ms of grace: f1 ends within it and is acked;
// the other messages in flight are cancelled at 200ms and nacked, the
// two still queued are never taken. f3's price ignores its context until
// 400ms: Shutdown returns then, once it has returned (Loop.Wait), and no
// goroutine is left.
func TestConsumerShutdownWaitsForTheCallsItCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		before := bubbleGoroutines()
		script := map[string][]scriptedCall{
			"price f1": {{d: 100 * time.Millisecond}},
			"price f3": {{d: 400 * time.Millisecond, deaf: true}},
		}
		msgs := []delivery{{"f1", "f1:x"}, {"f2", "f2:x"}, {"f3", "f3:x"}}
		for i := range 13 {
			script[fmt.Sprintf("price s%d", i)] = []scriptedCall{{d: time.Second}}
			msgs = append(msgs, delivery{fmt.Sprintf("s%d", i), fmt.Sprintf("s%d:x", i)})
		}
		script["price f2"] = []scriptedCall{{d: time.Second}}
		msgs = append(msgs, delivery{"q1", "q1:x"}, delivery{"q2", "q2:x"})
		f := newDownstream(script)
		log := &consumerLog{start: time.Now()}
		b := newBroker(msgs...)
		c := startConsumer(b, f.services(), time.Second, log.logf)
		time.Sleep(50 * time.Millisecond)
		counts, err := c.Shutdown(150*time.Millisecond, time.Second)
		if took := time.Since(log.start); took != 400*time.Millisecond {
			t.Errorf("Shutdown returned at %v, want 400ms", took)
		}
		wantCounts(t, counts, err, consumerCounts{Processed: 1, Nacked: 15})
		f.mu.Lock()
		if !slices.Equal(f.returned, []string{"price f3"}) {
			t.Errorf("deaf calls returned: %q, want f3's price", f.returned)
		}
		f.mu.Unlock()
		log.mu.Lock()
		if log.lines[0] != "100ms f1 ack" || len(log.lines) != 16 {
			t.Errorf("settlements: %q, want f1's ack at 100ms then 15 nacks", log.lines)
		}
		for _, l := range log.lines[1:] {
			if !strings.HasPrefix(l, "200ms ") || !strings.HasSuffix(l, " nack shutdown") {
				t.Errorf("settlement %q, want a nack at 200ms", l)
			}
		}
		log.mu.Unlock()
		if ids := b.settled["nack"]; len(b.queued) != 17 || b.queued[0].ID != "q1" || b.queued[1].ID != "q2" || len(ids) != 15 {
			t.Errorf("broker: %d queued (first %v), nacked %q; want q1, q2 then the 15 nacked", len(b.queued), b.queued[:2], ids)
		}
		synctest.Wait() // what is left of the goroutines that Wait waited for is their exit
		if n := bubbleGoroutines(); n != before {
			t.Errorf("%d goroutines in the bubble after Shutdown, %d before", n, before)
		}
	})
}

// A call that ignores its context past Shutdown's wait is reported, by
// message, and Shutdown returns at the end of the wait.
func TestConsumerShutdownReportsACallThatOutlivesItsWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newDownstream(map[string][]scriptedCall{"stock d": {{d: 2 * time.Second, deaf: true}}})
		log := &consumerLog{start: time.Now()}
		b := newBroker(delivery{"d", "d:1"})
		c := startConsumer(b, f.services(), time.Second, log.logf)
		time.Sleep(10 * time.Millisecond)
		counts, err := c.Shutdown(100*time.Millisecond, 300*time.Millisecond)
		if took := time.Since(log.start); took != 410*time.Millisecond {
			t.Errorf("Shutdown returned at %v, want 410ms", took)
		}
		want := "Await functions still running after 300ms: map[d:1]"
		if counts != (consumerCounts{Nacked: 1}) || err == nil || err.Error() != want {
			t.Errorf("Shutdown: %+v, %v; want {Nacked:1}, %s", counts, err, want)
		}
		log.want(t, "110ms d nack shutdown")
		time.Sleep(2 * time.Second) // the call returns before the bubble ends
	})
}
