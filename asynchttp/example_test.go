package asynchttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/asynchttp"
)

// A Handler serves each request with a flow on the next loop of a group;
// the first argument of the flow's last success is the JSON answer, its
// error the JSON error answer.
func ExampleHandler() {
	group := asyncsteps.NewLoopGroup(2)
	defer group.Close()

	h := &asynchttp.Handler{
		Tool:    func() asyncsteps.Tool { return group.Next() },
		Timeout: time.Second,
		Flow: func(as asyncsteps.AsyncSteps, req *http.Request) {
			name := req.URL.Query().Get("name")
			if name == "" {
				as.Error(asyncsteps.InvalidRequest, "no name")
			}
			as.Success(map[string]string{"hello": name})
		},
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	for _, query := range []string{"?name=gopher", ""} {
		resp, err := http.Get(srv.URL + query)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Print(resp.StatusCode, " ", string(body))
	}
	// Output:
	// 200 {"hello":"gopher"}
	// 400 {"error":"InvalidRequest","info":"no name"}
}

// A Client fetches from a step and succeeds with the answer whatever its
// status, unless its Check says otherwise: ServerError makes a 5xx a
// CommError, which asyncsteps.Retry makes again, each attempt under its
// own timeout. A transport error fails the step with ConnectError or
// CommError, which Retry retries as well; a request the attempt's timeout
// cuts short is a Timeout, retried too.
func ExampleClient() {
	attempts := 0
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		attempts++ // one request at a time in this example
		if attempts < 3 {
			http.Error(w, "warming up", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "42")
	}))
	defer upstream.Close()

	loop := asyncsteps.NewLoop()
	defer loop.Close()
	c := &asynchttp.Client{
		HTTP:  upstream.Client(),
		Check: asynchttp.ServerError,
		Done: func(_ *http.Request, status int, err error) {
			fmt.Println("status", status, err)
		},
	}

	r := asyncsteps.New(asyncsteps.WithTool(loop))
	asyncsteps.Retry(r, asyncsteps.RetryOptions{Attempts: 5, Timeout: time.Second}, func(as asyncsteps.AsyncSteps, i int) {
		fmt.Print("attempt ", i, ": ")
		c.Get(as, upstream.URL)
		asyncsteps.Then(as, func(as asyncsteps.AsyncSteps, resp *asynchttp.Response) {
			as.Success(string(resp.Body))
		})
	})
	answer, err := asyncsteps.Run[string](context.Background(), r)
	fmt.Println(answer, err)
	// Output:
	// attempt 0: status 503 CommError: asynchttp: upstream answered 503
	// attempt 1: status 503 CommError: asynchttp: upstream answered 503
	// attempt 2: status 200 <nil>
	// 42 <nil>
}

// ServerError as a Client's Check, once Retry has spent its attempts on
// an upstream that keeps failing: the flow's error is the last attempt's
// CommError, whose Cause, the StatusError that errors.As finds, holds the
// answer: its status and the upstream's error document.
func ExampleServerError() {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		http.Error(w, "database unreachable", http.StatusBadGateway)
	}))
	defer upstream.Close()
	loop := asyncsteps.NewLoop()
	defer loop.Close()
	c := &asynchttp.Client{HTTP: upstream.Client(), Check: asynchttp.ServerError}

	r := asyncsteps.New(asyncsteps.WithTool(loop))
	asyncsteps.Retry(r, asyncsteps.RetryOptions{Attempts: 2, Timeout: time.Second}, func(as asyncsteps.AsyncSteps, i int) {
		fmt.Println("attempt", i)
		c.Get(as, upstream.URL)
	})
	_, err := r.Run(context.Background())
	fmt.Println(err)
	var answer *asynchttp.StatusError
	if errors.As(err, &answer) {
		fmt.Printf("%d %q\n", answer.StatusCode, answer.Body)
	}
	// Output:
	// attempt 0
	// attempt 1
	// CommError: asynchttp: upstream answered 502
	// 502 "database unreachable\n"
}

// How a flow's error becomes an answer: the status follows the code
// (StatusOf), Codes adds the application's own codes, a 503 asks the client
// to come back later, a step's timeout says so, and an InternalError (here a
// panic) is logged, its info kept from the client.
func ExampleStatusOf() {
	h := &asynchttp.Handler{
		Codes:  map[string]int{"NotFound": http.StatusNotFound},
		Logger: slog.New(slog.DiscardHandler), // a 500 would be logged at Error
		Flow: func(as asyncsteps.AsyncSteps, req *http.Request) {
			switch req.URL.Query().Get("fail") {
			case "input":
				as.Error(asyncsteps.InvalidRequest, "no name")
			case "user":
				as.Error("NotFound", "no user 7")
			case "busy":
				as.Error(asyncsteps.DefenseRejected, "too many requests")
			case "slow":
				as.SetTimeout(time.Millisecond) // and nothing completes the step
			case "bug":
				panic("nil map")
			}
		},
	}
	for _, fail := range []string{"input", "user", "busy", "slow", "bug"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/?fail="+fail, nil))
		fmt.Printf("%d Retry-After=%q %s", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
	// Output:
	// 400 Retry-After="" {"error":"InvalidRequest","info":"no name"}
	// 404 Retry-After="" {"error":"NotFound","info":"no user 7"}
	// 503 Retry-After="1" {"error":"DefenseRejected","info":"too many requests"}
	// 504 Retry-After="" {"error":"Timeout","info":"request timed out"}
	// 500 Retry-After="" {"error":"InternalError","info":"internal error, see the server log"}
}

// NotFoundError is an application's own error. Its FutoInCode method gives
// the FutoIn code that a flow sees when an Await function returns it.
type NotFoundError struct{ ID string }

func (e *NotFoundError) Error() string      { return "no user " + e.ID }
func (e *NotFoundError) FutoInCode() string { return "NotFound" }

// An application's own error is answered with the status of its code: a Go
// error type with a FutoInCode method, returned by an Await function, or a
// code raised with as.Error; Codes gives each code its status. A plain Go
// error has no code: it is an InternalError, answered 500, its text logged,
// not shown to the client. The type here is
//
//	type NotFoundError struct{ ID string }
//
//	func (e *NotFoundError) Error() string      { return "no user " + e.ID }
//	func (e *NotFoundError) FutoInCode() string { return "NotFound" }
func ExampleHandler_applicationErrors() {
	users := map[string]string{"7": "gopher"}
	lookup := func(ctx context.Context, id string) (string, error) { // a database query, say
		if id == "" {
			return "", errors.New("users: no id in the query")
		}
		name, ok := users[id]
		if !ok {
			return "", &NotFoundError{ID: id}
		}
		return name, nil
	}
	h := &asynchttp.Handler{
		Codes:  map[string]int{"NotFound": http.StatusNotFound, "Gone": http.StatusGone},
		Logger: slog.New(slog.DiscardHandler), // the 500's text goes to the log
		Flow: func(as asyncsteps.AsyncSteps, req *http.Request) {
			id := req.URL.Query().Get("id")
			if id == "0" {
				as.Error("Gone", "user 0 was deleted")
			}
			asyncsteps.AwaitThen(as, func(ctx context.Context) (string, error) {
				return lookup(ctx, id)
			}, func(as asyncsteps.AsyncSteps, name string) {
				as.Success(map[string]string{"name": name})
			})
		},
	}
	for _, query := range []string{"?id=7", "?id=8", "?id=0", ""} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/user"+query, nil))
		fmt.Print(w.Code, " ", w.Body)
	}
	// Output:
	// 200 {"name":"gopher"}
	// 404 {"error":"NotFound","info":"no user 8"}
	// 410 {"error":"Gone","info":"user 0 was deleted"}
	// 500 {"error":"InternalError","info":"internal error, see the server log"}
}

// A 401 carries the WWW-Authenticate challenge that RFC 9110 requires,
// which only the application knows: ErrorHeader sets it, told by the
// status, or by the code (a PleaseReauth asks for a new token).
func ExampleHandler_errorHeader() {
	h := &asynchttp.Handler{
		Flow: func(as asyncsteps.AsyncSteps, req *http.Request) {
			switch req.Header.Get("Authorization") {
			case "":
				as.Error(asyncsteps.Unauthorized, "no token")
			case "Bearer old":
				as.Error(asyncsteps.PleaseReauth, "token expired")
			}
			as.Success(map[string]string{"account": "7"})
		},
		ErrorHeader: func(header http.Header, e *asyncsteps.Error, status int) {
			switch {
			case e.Code == asyncsteps.PleaseReauth:
				header.Set("WWW-Authenticate", `Bearer realm="api", error="invalid_token"`)
			case status == http.StatusUnauthorized:
				header.Set("WWW-Authenticate", `Bearer realm="api"`)
			}
		},
	}
	for _, auth := range []string{"", "Bearer old", "Bearer new"} {
		req := httptest.NewRequest("GET", "/account", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		fmt.Printf("%d WWW-Authenticate=%q %s", w.Code, w.Header().Get("WWW-Authenticate"), w.Body)
	}
	// Output:
	// 401 WWW-Authenticate="Bearer realm=\"api\"" {"error":"Unauthorized","info":"no token"}
	// 401 WWW-Authenticate="Bearer realm=\"api\", error=\"invalid_token\"" {"error":"PleaseReauth","info":"token expired"}
	// 200 WWW-Authenticate="" {"account":"7"}
}
