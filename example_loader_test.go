package asyncsteps_test

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/asyncsteps/asyncsteps"
)

// codeNotFound is the error code of a key that a batch call did not
// return: the application's own code, which fails the waiters of that key
// only.
const codeNotFound = "NotFound"

// Loader coalesces lookups of one kind (products by id, say) into batch
// calls, as the DataLoader pattern does: every Load that the flows of one
// loop make in a turn of that loop (while steps are ready to run: see
// asyncsteps.AtTurnEnd), from any parallel branch of any flow, is asked
// for in one call of fetch (GET /products?ids=1,2,3), at most maxBatch
// keys a call. A key asked for twice in a turn is fetched once;
// one asked for while a call fetches it waits for that call.
//
// A flow keeps what it loaded: a Load of a key that the same flow has
// loaded before succeeds at once, from a cache kept in the flow's State
// (a request's; a Root run again keeps its State, so a server makes a
// Root per request); another flow fetches again.
//
// An error of a batch call fails every Load waiting for it; a key the
// call's map lacks fails its own waiters only (codeNotFound). A Load that
// is cancelled (its flow's timeout, a failed parallel sibling,
// Root.Cancel) leaves its call without cancelling it for the others; the
// call is cancelled (fetch's context) once no Load waits for it, and a
// key that nobody waits for any more by the end of the turn is not asked
// for.
//
// All its work runs on the loops of the flows that Load, so it needs no
// lock but the one that finds a loop's share: the flows of a LoopGroup
// share one Loader, and each loop batches its own flows' keys.
type Loader[K comparable, V any] struct {
	name     string
	maxBatch int
	fetch    func(ctx context.Context, keys []K) (map[K]V, error)
	shards   sync.Map // asyncsteps.Tool → *loaderShard[K, V]
}

// NewLoader returns a Loader whose batch calls are fetch, with at most
// maxBatch keys each. fetch runs on a goroutine of its own (an Await)
// and must return once its context is done; name tells the Loader's cache
// apart in a flow's State and names the key of a NotFound.
func NewLoader[K comparable, V any](name string, maxBatch int, fetch func(ctx context.Context, keys []K) (map[K]V, error)) *Loader[K, V] {
	return &Loader[K, V]{name: name, maxBatch: max(maxBatch, 1), fetch: fetch}
}

// Load adds a step that succeeds with the value of key (read it with
// asyncsteps.Then[V]), or fails with the batch call's error, or with
// codeNotFound.
func (l *Loader[K, V]) Load(as asyncsteps.AsyncSteps, key K) asyncsteps.AsyncSteps {
	return as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		cache := l.cacheOf(as.State())
		if v, ok := cache[key]; ok {
			as.Success(v)
			return
		}
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { l.shardOf(as.Tool()).wait(as, key) })
		asyncsteps.Then(as, func(as asyncsteps.AsyncSteps, v V) {
			cache[key] = v
			as.Success(v)
		})
	})
}

// cacheOf returns the values that the flow of st has loaded.
func (l *Loader[K, V]) cacheOf(st *asyncsteps.State) map[K]V {
	name := "Loader " + l.name
	if m, ok := st.Get(name).(map[K]V); ok {
		return m
	}
	m := map[K]V{}
	st.Set(name, m)
	return m
}

// shardOf returns the Loader's share of the loop tool, made at its first
// Load there.
func (l *Loader[K, V]) shardOf(tool asyncsteps.Tool) *loaderShard[K, V] {
	if s, ok := l.shards.Load(tool); ok {
		return s.(*loaderShard[K, V])
	}
	s, _ := l.shards.LoadOrStore(tool, &loaderShard[K, V]{
		l: l, tool: tool, pending: map[K]*loaderKey{}, inflight: map[K]*loaderKey{},
	})
	return s.(*loaderShard[K, V])
}

// loaderShard is what a Loader keeps on one loop. Only that loop's
// goroutine uses it: Load's steps, their cancel handlers, the end of the
// turn (dispatch) and the end of a call (settle) all run there.
type loaderShard[K comparable, V any] struct {
	l        *Loader[K, V]
	tool     asyncsteps.Tool
	pending  map[K]*loaderKey // asked for in this turn
	order    []K              // pending's keys, first asked first
	inflight map[K]*loaderKey // being fetched by a call
}

// loaderKey is one key of a turn or of a call: the Loads waiting for it.
type loaderKey struct {
	waiters []*loaderWaiter
	live    int         // waiters not yet served nor gone
	call    *loaderCall // nil until the end of its turn
}

// loaderWaiter is a Load's step, waiting for its key.
type loaderWaiter struct {
	as   asyncsteps.AsyncSteps
	key  *loaderKey
	done bool // served, or gone (cancelled)
}

// loaderCall is one batch call in flight: its flow, and how many Loads
// still wait for it.
type loaderCall struct {
	root *asyncsteps.Root
	keys []*loaderKey
	live int
}

// wait makes the Load's step (its AsyncSteps as) wait for key: in the
// call that fetches it, or in this turn's batch, which the first key of
// the turn schedules for the end of the turn (asyncsteps.AtTurnEnd). The
// steps of the flows and branches that are ready run first, also those a
// step or two from their Load, on a Loop as on a TestTool, so that a
// fan-out of a thousand Loads goes out in one turn.
func (s *loaderShard[K, V]) wait(as asyncsteps.AsyncSteps, key K) {
	k := s.inflight[key]
	if k == nil {
		k = s.pending[key]
	}
	if k == nil {
		if len(s.pending) == 0 {
			asyncsteps.AtTurnEnd(s.tool, s.dispatch)
		}
		k = &loaderKey{}
		s.pending[key] = k
		s.order = append(s.order, key)
	}
	w := &loaderWaiter{as: as, key: k}
	k.waiters = append(k.waiters, w)
	k.live++
	if k.call != nil {
		k.call.live++
	}
	as.SetCancel(func(asyncsteps.AsyncSteps) { s.leave(w) })
}

// leave takes a cancelled Load out of its key, and cancels the key's
// call once no Load waits for it. Its key's other waiters keep theirs.
func (s *loaderShard[K, V]) leave(w *loaderWaiter) {
	if w.done {
		return // served: the error given to it runs its cancel handler too
	}
	w.done = true
	w.key.live--
	if c := w.key.call; c != nil {
		if c.live--; c.live == 0 {
			s.forget(c)
			c.root.Cancel()
		}
	}
}

// forget takes a call's keys out of those in flight, so that a later Load
// of them makes a new call rather than wait for this one.
func (s *loaderShard[K, V]) forget(c *loaderCall) {
	for key, k := range s.inflight {
		if k.call == c {
			delete(s.inflight, key)
		}
	}
}

// dispatch ends the turn: the keys still wanted go out in calls of at
// most maxBatch keys each.
func (s *loaderShard[K, V]) dispatch() {
	var keys []K
	var wanted []*loaderKey
	for _, key := range s.order {
		if k := s.pending[key]; k.live > 0 {
			keys, wanted = append(keys, key), append(wanted, k)
		}
	}
	clear(s.pending)
	s.order = s.order[:0]
	for len(keys) > 0 {
		n := min(len(keys), s.l.maxBatch)
		s.start(keys[:n:n], wanted[:n:n])
		keys, wanted = keys[n:], wanted[n:]
	}
}

// start makes the batch call of keys: a flow of its own on the loop,
// which its waiters do not own, so that a cancelled one leaves it
// running for the others.
func (s *loaderShard[K, V]) start(keys []K, wanted []*loaderKey) {
	c := &loaderCall{root: asyncsteps.New(asyncsteps.WithTool(s.tool)), keys: wanted}
	for i, k := range wanted {
		k.call = c
		c.live += k.live
		s.inflight[keys[i]] = k
	}
	asyncsteps.AwaitThen(c.root, func(ctx context.Context) (map[K]V, error) {
		return s.l.fetch(ctx, keys)
	}, nil)
	c.root.ExecuteThen(func(res asyncsteps.Result) { s.settle(c, keys, res) })
}

// settle gives the call's result to the Loads still waiting for it.
func (s *loaderShard[K, V]) settle(c *loaderCall, keys []K, res asyncsteps.Result) {
	s.forget(c)
	values, _ := asyncsteps.Arg[map[K]V](res.Args, 0)
	for i, k := range c.keys {
		for _, w := range k.waiters {
			if w.done {
				continue
			}
			w.done = true
			v, ok := values[keys[i]]
			switch {
			case res.Err != nil:
				asyncsteps.Fail(w.as, res.Err) // keeps fetch's error as the cause
			case !ok:
				w.as.Error(codeNotFound, fmt.Sprintf("%s: no %v", s.l.name, keys[i]))
			default:
				w.as.Success(v)
			}
		}
	}
}

// An order's lines, each with its product and the product's price, where
// naive code calls the catalog once per line and the price service once
// per product: the Loaders make one call each. The order has six lines
// of four products; each line, a parallel branch, loads its product,
// then the product's price, and the branches' Loads of one turn go out
// together.
func Example_loader() {
	type product struct{ Name, SKU string }
	catalog := map[int]product{1: {"pen", "P-1"}, 2: {"ink", "I-2"}, 3: {"pad", "D-3"}, 4: {"nib", "N-4"}}
	prices := map[string]int{"P-1": 150, "I-2": 420, "D-3": 300, "N-4": 90}

	// The backends: in a service, asynchttp.Client calls.
	products := NewLoader("products", 100, func(ctx context.Context, ids []int) (map[int]product, error) {
		fmt.Println("GET /products?ids=" + joinKeys(ids))
		found := map[int]product{}
		for _, id := range ids {
			found[id] = catalog[id]
		}
		return found, nil
	})
	cents := NewLoader("prices", 100, func(ctx context.Context, skus []string) (map[string]int, error) {
		fmt.Println("GET /prices?skus=" + joinKeys(skus))
		found := map[string]int{}
		for _, sku := range skus {
			found[sku] = prices[sku]
		}
		return found, nil
	})

	type line struct{ product, qty int }
	order := []line{{1, 2}, {2, 1}, {3, 5}, {2, 3}, {1, 1}, {4, 10}}
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	r := asyncsteps.New(asyncsteps.WithTool(loop))
	asyncsteps.Gather[string](r, nil, asyncsteps.Branches(order, func(as asyncsteps.AsyncSteps, l line) {
		products.Load(as, l.product)
		asyncsteps.Then(as, func(as asyncsteps.AsyncSteps, p product) {
			cents.Load(as, p.SKU)
			asyncsteps.Then(as, func(as asyncsteps.AsyncSteps, c int) {
				as.Success(fmt.Sprintf("%2d %s at %d.%02d", l.qty, p.Name, c/100, c%100))
			})
		})
	})...)
	lines, err := asyncsteps.Run[[]string](context.Background(), r)
	fmt.Println(strings.Join(lines, "\n"), err)
	// Output:
	// GET /products?ids=1,2,3,4
	// GET /prices?skus=P-1,I-2,D-3,N-4
	//  2 pen at 1.50
	//  1 ink at 4.20
	//  5 pad at 3.00
	//  3 ink at 4.20
	//  1 pen at 1.50
	// 10 nib at 0.90 <nil>
}

// joinKeys is keys as a query's comma-separated list.
func joinKeys[K any](keys []K) string {
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = fmt.Sprint(k)
	}
	return strings.Join(s, ",")
}
