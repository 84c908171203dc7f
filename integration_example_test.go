package asyncsteps_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/asyncsteps/asyncsteps"
)

// A blocking Go API, here an HTTP request, runs through Await on a goroutine
// of its own. SetTimeout on the enclosing step bounds it: on expiry the
// request's context is cancelled, so the request stops too, and the flow sees
// Timeout.
func ExampleAsyncSteps_Await() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/slow" {
			select { // answers only if the client is still there after 10s
			case <-req.Context().Done():
				return
			case <-time.After(10 * time.Second):
			}
		}
		fmt.Fprintf(w, "hello from %s", req.URL.Path)
	}))
	defer srv.Close()

	loop := asyncsteps.NewLoop()
	defer loop.Close()

	// get adds a step that fetches path within timeout and succeeds with the
	// body as a string.
	get := func(as asyncsteps.AsyncSteps, path string, timeout time.Duration, onerror ...asyncsteps.ErrorFunc) {
		as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			as.SetTimeout(timeout)
			as.Await(func(ctx context.Context) (any, error) {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
				if err != nil {
					return nil, err
				}
				resp, err := srv.Client().Do(req)
				if err != nil {
					return nil, err
				}
				defer resp.Body.Close()
				body, err := io.ReadAll(resp.Body)
				return string(body), err
			})
		}, onerror...)
	}

	r := asyncsteps.New(asyncsteps.WithTool(loop))
	get(r, "/fast", 5*time.Second)
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		body, _ := asyncsteps.Arg[string](args, 0)
		fmt.Println(body)
	})
	get(r, "/slow", 50*time.Millisecond, func(as asyncsteps.AsyncSteps, code string) {
		fmt.Println("slow:", code)
		as.Success("fallback")
	})
	args, err := r.Run(context.Background())
	fmt.Println(args, err)
	// Output:
	// hello from /fast
	// slow: Timeout
	// [fallback] <nil>
}

// A flow serving an HTTP request runs under the request's context: when the
// client goes away, Run cancels the flow, whose cancel handlers release what
// it held, and returns the context's error.
func ExampleRoot_Run_cancelFromContext() {
	loop := asyncsteps.NewLoop()
	defer loop.Close()

	waiting := make(chan struct{})
	handled := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		defer close(handled)
		r := asyncsteps.New(asyncsteps.WithTool(loop))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			// A long wait, for a lock or a slow backend.
			as.SetCancel(func(asyncsteps.AsyncSteps) {
				fmt.Println("server: step cancelled")
			})
			close(waiting)
		})
		_, err := r.Run(req.Context())
		fmt.Println("server: flow ended:", err)
	}))
	defer srv.Close()

	// The client gives up while the server's flow waits. (Cancelling on a
	// timer instead could, on a loaded machine, cancel the request before
	// the server has even read it.)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-waiting
		cancel()
	}()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	_, err := srv.Client().Do(req)
	<-handled
	fmt.Println("client: request canceled:", errors.Is(err, context.Canceled))
	// Output:
	// server: step cancelled
	// server: flow ended: context canceled
	// client: request canceled: true
}

func ExampleAwaitChan() {
	tt := asyncsteps.NewTestTool()
	replies := make(chan string)
	go func() { replies <- "pong" }()

	r := asyncsteps.New(asyncsteps.WithTool(tt))
	asyncsteps.AwaitChan(r, replies)
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		reply, _ := asyncsteps.Arg[string](args, 0)
		fmt.Println("got", reply)
	})
	// A wait that never ends is bounded by the timeout of its parent step.
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(time.Second)
		asyncsteps.AwaitChan(as, make(chan string))
	}, func(as asyncsteps.AsyncSteps, code string) {
		fmt.Println("no second reply:", code)
	})
	_, err := r.Run(context.Background())
	fmt.Println("err:", err)
	// Output:
	// got pong
	// no second reply: Timeout
	// err: Timeout
}

func ExampleAwaitFlow() {
	tt := asyncsteps.NewTestTool()

	login := asyncsteps.New(asyncsteps.WithTool(tt))
	login.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.Success("alice", 42)
	})

	stuck := asyncsteps.New(asyncsteps.WithTool(tt))
	stuck.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetCancel(func(asyncsteps.AsyncSteps) { fmt.Println("stuck: cancelled") })
	})

	r := asyncsteps.New(asyncsteps.WithTool(tt))
	asyncsteps.AwaitFlow(r, login)
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		fmt.Println("logged in:", args)
	})
	r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		as.SetTimeout(time.Second) // cancels the sub-flow on expiry
		asyncsteps.AwaitFlow(as, stuck)
	}, func(as asyncsteps.AsyncSteps, code string) {
		fmt.Println("sub-flow:", code)
		as.Success()
	})
	_, err := r.Run(context.Background())
	fmt.Println("err:", err)

	// The sub-flow stops asynchronously, on its own tool: here, once the
	// TestTool is driven again.
	tt.Run()
	// Output:
	// logged in: [alice 42]
	// sub-flow: Timeout
	// err: <nil>
	// stuck: cancelled
}

func ExampleAwaitResult() {
	tt := asyncsteps.NewTestTool()
	fetch := func(name string, fail bool) <-chan asyncsteps.Result {
		r := asyncsteps.New(asyncsteps.WithTool(tt))
		r.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
			if fail {
				as.Error(asyncsteps.NotImplemented, name+" is not there")
			}
			as.Success(name)
		})
		return r.Promise()
	}
	// Two flows run side by side; a third one joins them.
	users, orders := fetch("users", false), fetch("orders", true)

	r := asyncsteps.New(asyncsteps.WithTool(tt))
	asyncsteps.AwaitResult(r, users)
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) { fmt.Println("fetched", args) })
	asyncsteps.AwaitResult(r, orders, func(as asyncsteps.AsyncSteps, code string) {
		fmt.Println(code+":", as.State().ErrorInfo)
	})
	_, err := r.Run(context.Background())
	fmt.Println("NotImplemented:", errors.Is(err, &asyncsteps.Error{Code: asyncsteps.NotImplemented}))
	// Output:
	// fetched [users]
	// NotImplemented: orders is not there
	// NotImplemented: true
}

func ExampleArg() {
	tt := asyncsteps.NewTestTool()
	r := asyncsteps.New(asyncsteps.WithTool(tt))
	r.SuccessStep("alice", 42)
	r.Add(func(as asyncsteps.AsyncSteps, args ...any) {
		name, _ := asyncsteps.Arg[string](args, 0)
		age, ok := asyncsteps.Arg[int](args, 1)
		fmt.Println(name, age, ok)
		_, ok = asyncsteps.Arg[string](args, 1) // an int, not a string
		fmt.Println(ok)
		_, ok = asyncsteps.Arg[int](args, 2) // out of range
		fmt.Println(ok)
	})
	_, _ = r.Run(context.Background())
	// Output:
	// alice 42 true
	// false
	// false
}
