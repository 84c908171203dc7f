package asynchttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/asyncsteps/asyncsteps"
)

// Client adds steps that make outgoing HTTP requests from a flow.
//
// Each request runs through [asyncsteps.AsyncSteps.Await]: off the flow's
// loop (on the served request's goroutine, when a [Handler] waits for the
// flow and that goroutine is free), with a context that ends the moment
// its step is cancelled (a step timeout around it, a failed parallel
// sibling, the flow cancelled because its client went away), which
// aborts the request at once, also while its body is read. The step
// succeeds with a [*Response] whatever the status: the flow decides what a
// 404 or a 503 means. A request that gets no answer fails the step with an
// [*asyncsteps.Error]:
//
//   - InternalError when the request cannot be sent as it is: Get's url
//     does not parse, or net/http will not send the request, whose URL has
//     a scheme other than http and https, or none ("example.com/x"), or no
//     host, whose method or a header field cannot be written, or which is
//     a server's request (RequestURI set). The info names the problem and
//     the URL. The URL a step gives a Client is the program's (a
//     configured upstream), and so is the mistake: a [Handler] answers it
//     500 and logs it at Error, and [asyncsteps.Retry] does not retry it
//     unless told to, since every attempt would fail the same. A flow that
//     builds a URL from its client's input checks it itself and raises
//     InvalidRequest. A redirect to such a URL is the server's doing: a
//     CommError;
//   - ConnectError when the connection could not be made (the dial or the
//     name lookup failed);
//   - CommError for any other transport error: the connection broke, the
//     answer was malformed or its body longer than MaxBody, the Client's
//     own http.Client.Timeout expired;
//   - Timeout when a deadline the step's context carries has passed;
//   - instead of ConnectError or CommError, the code of an
//     [*asyncsteps.Error] or an [asyncsteps.FutoInCoder] that the HTTP
//     client's own code returned (its RoundTripper, its CheckRedirect,
//     the reader of a request's body), as [asyncsteps.ErrorFrom] gives it.
//
// Each keeps the Go error as Cause. A request cancelled by its step reports
// nothing: the step has ended already.
//
// The zero Client sends with [http.DefaultClient], reads at most 1 MiB of
// body and has no guard; a nil *Client acts as the zero one. A Client is
// safe for concurrent use once set up.
type Client struct {
	// HTTP sends the requests; nil means http.DefaultClient.
	HTTP *http.Client

	// Guard, if not nil, runs each request inside its critical section:
	// an [asyncsteps.Limiter] bounds the requests in flight to a service
	// and their rate, across every flow that shares it.
	Guard asyncsteps.Syncer

	// MaxBody bounds the bytes of body read; 0 or less means 1 MiB, and
	// math.MaxInt64 sets no bound. A longer body fails the step with
	// CommError, at once if its Content-Length says so. The header is
	// bounded by HTTP's transport (its MaxResponseHeaderBytes: 10 MB in
	// net/http's DefaultTransport), not by MaxBody.
	MaxBody int64

	// Done, if not nil, is called on the request's goroutine when a request
	// ends, with its status (0 when there is no answer) and its error: nil,
	// the *asyncsteps.Error the step fails with, or, for a request cut short
	// by its step's context, that context's error (context.Canceled, or
	// context.DeadlineExceeded if the context carries a deadline that
	// passed). A panic in Done fails the step with InternalError, answer
	// or not, as a panic in an Await function does.
	Done func(req *http.Request, status int, err error)
}

// Response is an answer to an outgoing request, its body read in full.
type Response struct {
	StatusCode int
	Header     http.Header
	Body       []byte
}

// Get adds a step that sends a GET request for url; see [Client.Do]. A
// url that does not parse fails the step with InternalError, and is
// neither sent nor given to Done; one that parses but that net/http will
// not send (ftp://host/x, a url without a scheme or a host) fails it with
// InternalError too, given to Done with status 0, as a request with no
// answer is. Both are the program's mistake (see [Client]).
func (c *Client) Get(as asyncsteps.AsyncSteps, url string, onerror ...asyncsteps.ErrorFunc) asyncsteps.AsyncSteps {
	c = c.orZero()
	// The request is made on the Await goroutine with the step's context:
	// one request per attempt, not one more to clone.
	return c.add(as, func(ctx context.Context) (any, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, &asyncsteps.Error{Code: asyncsteps.InternalError, Info: "asynchttp: " + err.Error(), Cause: err}
		}
		return c.send(ctx, req)
	}, onerror)
}

// Do adds a step that sends req, with the context of its step, and
// succeeds with the [*Response]; onerror is the step's error handler. The
// context of req itself is not used: its values, its cancel and its
// deadline give way to the step's (whose values are those of the flow's
// Run context). A request with a body can be sent again (a retry loop
// calling Do for each attempt) only if req.GetBody is set, as
// http.NewRequest does for the usual body types: without it, as with
// net/http, a later attempt sends what the first left of the body, which
// is nothing: a CommError when req.ContentLength announced the body, an
// empty body the server accepts when it did not. A nil req, or one
// without a URL, fails the step with InternalError, and is neither sent
// nor given to Done; one that net/http will not send fails it with
// InternalError too, given to Done (see [Client]).
func (c *Client) Do(as asyncsteps.AsyncSteps, req *http.Request, onerror ...asyncsteps.ErrorFunc) asyncsteps.AsyncSteps {
	c = c.orZero()
	return c.add(as, func(ctx context.Context) (any, error) {
		switch {
		case req == nil:
			return nil, &asyncsteps.Error{Code: asyncsteps.InternalError, Info: "asynchttp: Do: nil request"}
		case req.URL == nil:
			return nil, &asyncsteps.Error{Code: asyncsteps.InternalError, Info: "asynchttp: Do: request without a URL"}
		}
		out := req.Clone(ctx)
		if req.Body != nil && req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, &asyncsteps.Error{Code: asyncsteps.InternalError, Info: "asynchttp: GetBody: " + err.Error(), Cause: err}
			}
			out.Body = body
		}
		return c.send(ctx, out)
	}, onerror)
}

// add adds the step that runs send, which makes the request and sends it:
// one closure per request, built by Get or Do.
func (c *Client) add(as asyncsteps.AsyncSteps, send asyncsteps.AwaitFunc, onerror []asyncsteps.ErrorFunc) asyncsteps.AsyncSteps {
	if c.Guard == nil {
		return as.Await(send, onerror...) // one step, not a step and its Await
	}
	return as.Add(func(as asyncsteps.AsyncSteps, _ ...any) {
		c.Guard.Sync(as, func(as asyncsteps.AsyncSteps, _ ...any) { as.Await(send) })
	}, onerror...)
}

// send sends req, made with ctx, and reads the answer, on the Await
// goroutine.
func (c *Client) send(ctx context.Context, req *http.Request) (*Response, error) {
	resp, status, err := c.roundTrip(ctx, req)
	if c.Done != nil {
		reported := err
		if err != nil && ctx.Err() != nil {
			reported = ctx.Err()
		}
		c.Done(req, status, reported)
	}
	return resp, err
}

// roundTrip sends req and reads the answer, whose status it also returns
// when the body could not be read.
func (c *Client) roundTrip(ctx context.Context, req *http.Request) (*Response, int, error) {
	hr, err := c.httpClient().Do(req)
	if err != nil {
		if problem := refusal(req, err); problem != "" && ctx.Err() == nil {
			// Not a CommError, which the default of Retry retries in vain,
			// nor an InvalidRequest, which a Handler answers 400 unlogged:
			// the URL is the program's, and so is the mistake.
			return nil, 0, &asyncsteps.Error{Code: asyncsteps.InternalError, Info: "asynchttp: " + problem, Cause: err}
		}
		return nil, 0, transportError(ctx, err)
	}
	defer hr.Body.Close()
	limit := c.maxBody()
	if hr.ContentLength > limit && hr.Body != http.NoBody {
		// Announced longer: failed at once, not once limit bytes have come,
		// which a server sending them slowly makes last until the step's
		// timeout.
		return nil, hr.StatusCode, bodyTooLong()
	}
	body, err := readBody(hr, limit)
	if err != nil {
		return nil, hr.StatusCode, transportError(ctx, err)
	}
	if int64(len(body)) > limit {
		return nil, hr.StatusCode, bodyTooLong()
	}
	return &Response{StatusCode: hr.StatusCode, Header: hr.Header, Body: body}, hr.StatusCode, nil
}

// bodyTooLong is the error of a response body longer than MaxBody.
func bodyTooLong() error {
	return &asyncsteps.Error{Code: asyncsteps.CommError, Info: "asynchttp: response body longer than MaxBody"}
}

// readBody reads the body of hr, up to limit bytes and one more, which
// tells a longer body. A short body of known length is read into a buffer
// of exactly its size: io.ReadAll starts at 512 bytes and grows, most of it
// wasted on the short answers of an API. (The transport ends a body at its
// Content-Length; one cut shorter fails the read.) A longer one grows as
// its bytes come: a Content-Length is only what the server claims, and a
// buffer made for it would let a server that lies make the Client allocate
// up to MaxBody per request for nothing.
func readBody(hr *http.Response, limit int64) ([]byte, error) {
	switch n := hr.ContentLength; {
	case hr.Body == http.NoBody:
		// An answer to HEAD keeps the Content-Length of the body it has not.
		return []byte{}, nil
	case n >= 0 && n <= min(limit, maxExactBody):
		body := make([]byte, n)
		_, err := io.ReadFull(hr.Body, body)
		return body, err
	}
	// One byte more than limit tells a longer body; no byte more than the
	// largest int64, which would wrap to a limit that reads nothing.
	return io.ReadAll(io.LimitReader(hr.Body, min(limit, math.MaxInt64-1)+1))
}

// maxExactBody bounds the bodies read into a buffer made for their
// Content-Length before their bytes arrive (see readBody).
const maxExactBody = 64 << 10

// refusal says what is wrong with req when err, the error of sending it,
// is net/http's refusal to send it at all: a URL whose scheme it does not
// speak or without a host, a method or a header field it cannot write, a
// request made for a server (RequestURI set); "" for any other error.
// Such a request is the program's mistake, which no retry mends: an
// InternalError, not a CommError. net/http tells these errors only by
// their text; the URL of req is checked as well, so that the same refusal
// of a redirect's URL, chosen by the server, stays a CommError. A
// RoundTripper registered for another scheme answers for itself.
func refusal(req *http.Request, err error) string {
	ue, ok := err.(*url.Error)
	if !ok || ue.Err == nil {
		return ""
	}
	msg, scheme := ue.Err.Error(), req.URL.Scheme
	problem := ""
	switch {
	case strings.HasPrefix(msg, "unsupported protocol scheme") && scheme == "":
		problem = "URL without a scheme (http or https)"
	case strings.HasPrefix(msg, "unsupported protocol scheme") && scheme != "http" && scheme != "https":
		problem = fmt.Sprintf("URL scheme %q not supported (http or https)", scheme)
	case msg == "http: no Host in request URL" && req.URL.Host == "":
		problem = "URL without a host"
	case strings.HasPrefix(msg, "net/http: invalid method"),
		strings.HasPrefix(msg, "net/http: invalid header"),
		strings.HasPrefix(msg, "net/http: invalid trailer"),
		msg == "http: Request.RequestURI can't be set in client requests":
		problem = msg
	default:
		return ""
	}
	return fmt.Sprintf("%s %q: %s", ue.Op, ue.URL, problem)
}

// transportError maps an error of sending or reading to the step's error.
// The mapping is done here, not left to Await, so that it does not depend
// on how Await treats Go errors: a deadline of the step's context that
// passed is a Timeout; a cancelled step reads no result; an
// *asyncsteps.Error or a FutoInCoder in err's chain gives its code.
func transportError(ctx context.Context, err error) error {
	switch ctx.Err() {
	case nil:
	case context.DeadlineExceeded:
		return &asyncsteps.Error{Code: asyncsteps.Timeout, Cause: err}
	default:
		return ctx.Err()
	}
	var coded *asyncsteps.Error
	var coder asyncsteps.FutoInCoder
	if errors.As(err, &coded) || errors.As(err, &coder) && givesCode(coder) {
		// A code the caller's own code chose (its RoundTripper, its
		// CheckRedirect, the reader of its request's body) stays its code,
		// as Await keeps it: not a CommError that a retry loop would
		// attempt again. A FutoInCoder that gives none chose nothing, as
		// ErrorFrom reads it: its error is mapped as any other here, not
		// by ErrorFrom's rules for Go errors.
		return asyncsteps.ErrorFrom(err)
	}
	code := asyncsteps.CommError
	var op *net.OpError
	var dns *net.DNSError
	if (errors.As(err, &op) && op.Op == "dial") || errors.As(err, &dns) {
		code = asyncsteps.ConnectError
	}
	return &asyncsteps.Error{Code: code, Info: err.Error(), Cause: err}
}

// givesCode reports whether c gives a code. One whose FutoInCode panics
// (a nil pointer in the chain) is said to, so that ErrorFrom names the
// fault: the panic must not end the request's goroutine before Done.
func givesCode(c asyncsteps.FutoInCoder) (gives bool) {
	defer func() {
		if recover() != nil {
			gives = true
		}
	}()
	return c.FutoInCode() != ""
}

// zeroClient is what a nil *Client acts as.
var zeroClient Client

// orZero returns c, or the zero Client for a nil c.
func (c *Client) orZero() *Client {
	if c == nil {
		return &zeroClient
	}
	return c
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

func (c *Client) maxBody() int64 {
	if c.MaxBody > 0 {
		return c.MaxBody
	}
	return 1 << 20
}
