package asynchttp

import (
	"compress/flate"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/asyncsteps/asyncsteps"
	"github.com/asyncsteps/asyncsteps/internal/misuse"
	"github.com/asyncsteps/asyncsteps/internal/netfail"
	"github.com/asyncsteps/asyncsteps/internal/printsafe"
)

// Client adds steps that make outgoing HTTP requests from a flow.
//
// Each request runs through [asyncsteps.AsyncSteps.Await]: off the flow's
// loop (on the served request's goroutine, when a [Handler] waits for the
// flow and that goroutine is free), with a context that ends the moment
// its step is cancelled (a step timeout around it, a failed parallel
// sibling, the flow cancelled because its client went away), which
// aborts the request at once, also while its body is read. The step
// succeeds with a [*Response] whatever the status, unless Check fails it:
// the flow decides what a 404 or a 503 means (Check: [ServerError] makes a
// 5xx a CommError, which [asyncsteps.Retry] retries). A request that gets
// no answer fails the step with an [*asyncsteps.Error]:
//
//   - InternalError when the request cannot be sent as it is: Get's url
//     does not parse, or net/http will not send the request, whose URL has
//     a scheme other than http and https, or none ("example.com/x"), or no
//     host, whose method or a header field cannot be written, or which is
//     a server's request (RequestURI set). The info names the problem and
//     the URL, without its password ("http://ann:***@host/p"; in a URL
//     that does not parse, or has no host, such as "ann:pw@host/p", which
//     forgot its scheme, all before its last "@" is "***": see
//     [Client.Get]). The URL a step gives a Client is the program's (a
//     configured upstream), and so is the mistake: a [Handler] answers it
//     500 and logs it at Error, and [asyncsteps.Retry] does not retry it
//     unless told to, since every attempt would fail the same. A flow that
//     builds a URL from its client's input checks it itself and raises
//     InvalidRequest. A redirect to such a URL is the server's doing: a
//     CommError;
//   - ConnectError when the connection could not be made (the dial or the
//     name lookup failed);
//   - CommError for any other transport error: the connection broke, the
//     answer was malformed or its body longer than MaxBody (whose Cause, a
//     [*BodyTooLongError], keeps the answer's status and header), the
//     Client's own http.Client.Timeout expired;
//   - Timeout when a deadline the step's context carries has passed;
//   - instead of ConnectError or CommError, the code of an
//     [*asyncsteps.Error] or an [asyncsteps.FutoInCoder] that the HTTP
//     client's own code returned (its RoundTripper, its CheckRedirect,
//     the reader of a request's body), as [asyncsteps.ErrorFrom] gives it.
//
// The info of a ConnectError or a CommError names the kind of failure in
// fixed words, "asynchttp: GET: connection refused" say (the list is
// [RequestError]'s), never the URL, host or address that the Go error's
// text names: a [Handler] answers that info to its client, who must not
// learn where the server connects. Each error keeps the Go error as
// Cause, which a Handler logs with every detail: net/http's error names
// the URL with its password hidden, but its user name and its query as
// they are, so a secret belongs in a header (Authorization), not there.
// A request cancelled by its step reports nothing: the step has ended
// already.
//
// The zero Client sends with [http.DefaultClient], reads at most 1 MiB of
// body, has no guard and checks no status; a nil *Client acts as the zero
// one. A Client is safe for concurrent use once set up.
type Client struct {
	// HTTP sends the requests; nil means http.DefaultClient.
	HTTP *http.Client

	// Guard, if not nil, runs each request inside its critical section:
	// an [asyncsteps.Limiter] bounds the requests in flight to a service
	// and their rate, across every flow that shares it. The wait for it
	// is among the steps Get and Do add, so a timeout around them (a
	// Retry attempt's) covers it. A request it rejects fails with
	// DefenseRejected, which [asyncsteps.Retry] does not retry unless
	// told to; mind that a Limiter's zero MaxQueue rejects every request
	// beyond Concurrent at once, where a Mutex queues them.
	Guard asyncsteps.Syncer

	// MaxBody bounds the bytes of body read; 0 or less means 1 MiB, and
	// math.MaxInt64 sets no bound. A longer body fails the step with
	// CommError, at once if its Content-Length says so, whose Cause is a
	// [*BodyTooLongError] with the answer's status and header (the
	// Retry-After of a 429 with a long error page, say). The header is
	// bounded by HTTP's transport (its MaxResponseHeaderBytes: 10 MB in
	// net/http's DefaultTransport), not by MaxBody.
	MaxBody int64

	// Check, if not nil, is called on the request's goroutine with each
	// answer, its body read, before Done: an error it returns fails the
	// step instead of the success with the answer, as the error of an
	// Await function does (an [*asyncsteps.Error] as it is, another Go
	// error as [asyncsteps.ErrorFrom] maps it), and is given to Done.
	// [ServerError] is the usual check; one of the program's own adds to
	// it (a 429 that a Retry should retry too, say: see [StatusError]). A
	// typed nil error, or an *asyncsteps.Error without a Code, is the
	// mistake an Await function's is (an InternalError that names it); a
	// panic in Check, or a call of runtime.Goexit, fails the step with
	// InternalError. Done is given the error the step fails with.
	Check func(resp *Response) error

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
// answer is. Both are the program's mistake (see [Client]). The info and
// the Cause of a url that does not parse quote it with all before its
// last "@" (after its first "//", if it has one) shown as "***": the
// user information (of a url with a scheme, of one such as
// "//ann:pw@host/p", or what was meant as one in "ann:pw@host"), whose
// password a log line must not show, or, in a url that has none, what
// precedes an "@" of its query. A url that parses once that part is
// hidden is said not to parse in it.
func (c *Client) Get(as asyncsteps.AsyncSteps, url string, onerror ...asyncsteps.ErrorFunc) asyncsteps.AsyncSteps {
	if info := misuse.ExtraArgs("Get", "error handler", len(onerror)); info != "" {
		return refuse(as, info)
	}
	c = c.orZero()
	// The request is made on the Await goroutine with the step's context:
	// one request per attempt, not one more to clone.
	return c.add(as, func(ctx context.Context) (any, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			err = withoutUserinfo(url, err)
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
// InternalError too, given to Done (see [Client]). Given more than one
// error handler, Do, as Get, adds a step that fails with InternalError
// "Do: more than one error handler (2 given)" ("Get: ..."), and sends
// nothing.
func (c *Client) Do(as asyncsteps.AsyncSteps, req *http.Request, onerror ...asyncsteps.ErrorFunc) asyncsteps.AsyncSteps {
	if info := misuse.ExtraArgs("Do", "error handler", len(onerror)); info != "" {
		return refuse(as, info)
	}
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

// withoutUserinfo returns err, the error of parsing rawURL, or, when
// rawURL may have user information (an "@" after its first "//", or
// anywhere in a URL without one), the error of parsing rawURL with all
// before its last "@" (after that "//") shown as "***". url.Parse's
// error quotes the URL whole, or the part of a password it took for a
// port: net/http hides the password of a URL it parsed, not of one that
// does not parse, and a password that has a "/", "#" or "?" its owner did
// not percent-encode is such a URL. The part hidden may be a query's
// instead ("?mail=a@b"): the error then names less of the URL, never a
// password. When the URL parses without that part, the problem was in it,
// and the error says so.
func withoutUserinfo(rawURL string, err error) error {
	shown, hidden := hideBeforeLastAt(rawURL)
	if !hidden {
		return err
	}
	if _, err := url.Parse(shown); err != nil {
		return err
	}
	return &url.Error{Op: "parse", URL: shown, Err: errHiddenUserinfo}
}

// hideBeforeLastAt returns rawURL with all before its last "@" (after its
// first "//", if it has one) shown as "***", and whether it had an "@"
// there.
func hideBeforeLastAt(rawURL string) (string, bool) {
	// "//", not "://": a URL without a scheme ("//ann:pw@host/p") has user
	// information too, which url.Parse reads as such. One without "//"
	// has none, but may hold a password meant as such ("ann:pw@host",
	// whose scheme url.Parse takes to be "ann"): all before its last "@"
	// is hidden.
	authority := 0
	if slashes := strings.Index(rawURL, "//"); slashes >= 0 {
		authority = slashes + len("//")
	}
	at := strings.LastIndex(rawURL[authority:], "@")
	if at < 0 {
		return rawURL, false
	}
	return rawURL[:authority] + "***" + rawURL[authority+at:], true
}

// withoutOpaqueUserinfo returns err, net/http's error of sending req, with
// its URL shown as withoutUserinfo shows one when req's URL has an "@" but
// no host: "ann:pw@host/p" parses, with "ann" for its scheme and the rest
// opaque, and net/http, which hides only the password of a URL's user
// information, quotes it whole.
func withoutOpaqueUserinfo(req *http.Request, err error) error {
	ue, ok := err.(*url.Error)
	if !ok || req == nil || req.URL == nil || req.URL.User != nil || req.URL.Host != "" {
		return err
	}
	shown, hidden := hideBeforeLastAt(ue.URL)
	if !hidden {
		return err
	}
	return &url.Error{Op: ue.Op, URL: shown, Err: ue.Err}
}

// errHiddenUserinfo is the problem of a URL that parses only without the
// part withoutUserinfo hides.
var errHiddenUserinfo = errors.New(`does not parse; the part before its last "@" is not shown (a password, say)`)

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

// refuse adds to as a step that fails with InternalError, info: the
// refusal of a call given more than one error handler, which it names.
// Passed on, the handlers made Await or Add refuse them, and the info
// named a call the user did not make.
func refuse(as asyncsteps.AsyncSteps, info string) asyncsteps.AsyncSteps {
	return as.Add(func(as asyncsteps.AsyncSteps, _ ...any) { as.Error(asyncsteps.InternalError, info) })
}

// send sends req, made with ctx, and reads the answer, on the Await
// goroutine.
func (c *Client) send(ctx context.Context, req *http.Request) (*Response, error) {
	resp, status, err := c.roundTrip(ctx, req)
	if err == nil && c.Check != nil {
		if err = c.check(ctx, req, status, resp); err != nil {
			resp = nil
		}
	}
	c.done(ctx, req, status, err)
	return resp, err
}

// done tells Done, if set, that req ended with status and err.
func (c *Client) done(ctx context.Context, req *http.Request, status int, err error) {
	if c.Done == nil {
		return
	}
	if err != nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	c.Done(req, status, err)
}

// check returns the error Check makes of resp, the answer to req, as the
// *asyncsteps.Error the step fails with, which Done is given: a typed nil
// is named as the mistake it is, as for an Await function. A Check that
// calls runtime.Goexit ends the goroutine, and the step fails as after a
// Goexit in an Await function; Done is told of it on the way.
func (c *Client) check(ctx context.Context, req *http.Request, status int, resp *Response) (err error) {
	returned := false
	defer func() {
		if returned {
			return
		}
		if v := recover(); v != nil {
			err = &asyncsteps.Error{Code: asyncsteps.InternalError, Info: "asynchttp: Check panicked: " + printsafe.Sprint(v)}
			return
		}
		c.done(ctx, req, status, &asyncsteps.Error{Code: asyncsteps.InternalError, Info: misuse.GoexitInfo})
	}()
	err = mapCheckError(c.Check(resp)) // its mapping runs the error's methods, user code too
	returned = true
	return err
}

// mapCheckError returns err as the step fails with it: an
// *asyncsteps.Error of a code as it is, another error as
// asyncsteps.ErrorFrom maps it (a typed nil *asyncsteps.Error, or one
// without a code, included: the mistakes it names), nil as nil.
func mapCheckError(err error) error {
	if e, ok := err.(*asyncsteps.Error); ok && e != nil && e.Code != "" {
		return e
	}
	if e := asyncsteps.ErrorFrom(err); e != nil {
		return e
	}
	return nil // not the nil *asyncsteps.Error, which is no nil error
}

// ServerError is the usual [Client].Check: it returns nil for an answer
// whose status is not a 5xx, and for a 5xx (500 to 599: a status past
// 599 names no failure) the CommError that [asyncsteps.Retry] retries,
// its info "asynchttp: upstream answered 503" (naming no upstream), its
// Cause a [*StatusError] that holds the answer whole. A 429 is no server
// error: the client asked too much, and whether to retry it is the
// program's choice (see StatusError). A nil resp gives nil.
func ServerError(resp *Response) error {
	if resp == nil || resp.StatusCode < 500 || resp.StatusCode > 599 {
		return nil
	}
	return &asyncsteps.Error{
		Code:  asyncsteps.CommError,
		Info:  fmt.Sprintf("asynchttp: upstream answered %d", resp.StatusCode),
		Cause: &StatusError{Response: *resp},
	}
}

// StatusError is the Cause of the error [ServerError] returns: the answer
// whose status failed the step, its header and body included, which
// [errors.As] finds in the step's error (an error handler's
// as.State().LastException, the error an [asyncsteps.RetryOptions].Delay
// is given): an upstream's error document, or the wait its Retry-After
// asks for ([RetryAfter]). Its text names the status only, not the
// header, which may carry a cookie, nor the body, of any length. A Check
// of the program's own that also retries a 429 makes one so:
//
//	Check: func(resp *asynchttp.Response) error {
//		if resp.StatusCode == http.StatusTooManyRequests {
//			return &asyncsteps.Error{Code: asyncsteps.CommError, Info: "upstream answered 429",
//				Cause: &asynchttp.StatusError{Response: *resp}}
//		}
//		return asynchttp.ServerError(resp)
//	},
type StatusError struct {
	Response
}

// Error names the status.
func (e *StatusError) Error() string {
	return fmt.Sprintf("asynchttp: answer of status %d", e.StatusCode)
}

// roundTrip sends req and reads the answer, whose status it also returns
// when the body could not be read.
func (c *Client) roundTrip(ctx context.Context, req *http.Request) (*Response, int, error) {
	hr, err := c.httpClient().Do(req)
	if err != nil {
		return nil, 0, transportError(ctx, req, err)
	}
	defer hr.Body.Close()
	limit := c.maxBody()
	if hr.ContentLength > limit && hr.Body != http.NoBody {
		// Announced longer: failed at once, not once limit bytes have come,
		// which a server sending them slowly makes last until the step's
		// timeout.
		return nil, hr.StatusCode, bodyTooLong(hr, limit)
	}
	body, err := readBody(hr, limit)
	if err != nil {
		return nil, hr.StatusCode, transportError(ctx, req, err)
	}
	if int64(len(body)) > limit {
		return nil, hr.StatusCode, bodyTooLong(hr, limit)
	}
	return &Response{StatusCode: hr.StatusCode, Header: hr.Header, Body: body}, hr.StatusCode, nil
}

// RetryAfter returns the wait that an answer's Retry-After header asks
// for (RFC 9110, section 10.2.3), and whether it asks for one: a number
// of seconds ("120"), or an HTTP date, from which now is subtracted (a
// date past is a wait of 0). In a flow, now is the flow's clock,
// as.Tool().Now(). A header that is absent, or neither a whole number of
// seconds nor a date, asks for nothing; a number too large for a
// time.Duration is its largest. [asyncsteps.RetryOptions].Delay honours
// the wait; ExampleClient_syncJob shows it. The header of an answer whose
// body was longer than MaxBody is its [*BodyTooLongError]'s.
func RetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil || secs > math.MaxInt64/int64(time.Second) {
			return math.MaxInt64, true // digits all: only too large
		}
		return time.Duration(secs) * time.Second, true
	}
	date, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(date.Sub(now), 0), true
}

// isDigits reports whether s is made of ASCII digits only.
func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// bodyTooLong is the error of hr, whose body is longer than limit: the
// same code and info for every such answer, its status and header in the
// Cause.
func bodyTooLong(hr *http.Response, limit int64) error {
	return &asyncsteps.Error{
		Code:  asyncsteps.CommError,
		Info:  "asynchttp: response body longer than MaxBody",
		Cause: &BodyTooLongError{StatusCode: hr.StatusCode, Header: hr.Header, Limit: limit},
	}
}

// BodyTooLongError is the Cause of the CommError that fails a [Client]'s
// step when the answer's body is longer than MaxBody. The step's code and
// info are the same whatever the answer; its status and header, read
// before the body, stay reachable with [errors.As]. A provider may answer
// a 429 or a 503 with a long error page (HTML), whose Retry-After a
// [asyncsteps.RetryOptions].Delay honours so:
//
//	var tooLong *asynchttp.BodyTooLongError
//	if errors.As(err, &tooLong) {
//		if wait, ok := asynchttp.RetryAfter(tooLong.Header, now); ok {
//			return wait
//		}
//	}
//
// The body itself is not kept. Its text, which a [Handler] logs as the
// cause, names the status and the limit, not the header, which may carry
// a cookie.
type BodyTooLongError struct {
	StatusCode int         // the answer's status
	Header     http.Header // the answer's header, as a Response would have had it
	Limit      int64       // the bound the body went over: MaxBody, or its default
}

// Error says which answer had a body too long, and the limit.
func (e *BodyTooLongError) Error() string {
	return fmt.Sprintf("asynchttp: body of a %d answer longer than MaxBody (%d bytes)", e.StatusCode, e.Limit)
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
	if !ok || ue.Err == nil || req == nil || req.URL == nil {
		return ""
	}
	msg, scheme := ue.Err.Error(), req.URL.Scheme
	if u := req.URL; u.Host == "" && u.User == nil && u.Opaque != "" && strings.Contains(u.Opaque+u.RawQuery+u.Fragment, "@") {
		// "ann:pw@host/p": a URL without a scheme, whose user url.Parse
		// read as its scheme, not to be named; also when a "?" or "#"
		// of the password cut the opaque part short ("ann:pw?x@host").
		scheme = ""
	}
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

// transportError maps an error of sending req or reading its answer, with
// ctx, to the step's error. The mapping is done here, not left to Await,
// so that it does not depend on how Await treats Go errors: a deadline of
// the step's context that passed is a Timeout; a cancelled step reads no
// result; any other error is mapped by RequestError.
func transportError(ctx context.Context, req *http.Request, err error) error {
	switch ctx.Err() {
	case nil:
	case context.DeadlineExceeded:
		// Its Cause shows the URL as RequestError's does: a hook of the
		// Await's end sees it.
		return &asyncsteps.Error{Code: asyncsteps.Timeout, Cause: withoutOpaqueUserinfo(req, err)}
	default:
		return ctx.Err()
	}
	return RequestError(req, err)
}

// RequestError returns the error that a [Client] fails its step with when
// req, sent with net/http, got no answer, or its answer's body could not
// be read: err is what [http.Client.Do] returned, or the read of the body.
// The first rule that matches gives it:
//
//   - the code of an [*asyncsteps.Error] or an [asyncsteps.FutoInCoder]
//     in err's chain, as [asyncsteps.ErrorFrom] gives it: the HTTP
//     client's own code (its RoundTripper, its CheckRedirect, the reader
//     of req's body) chose it. The info is that of the error net/http's
//     *url.Error wraps, without the URL it adds;
//   - InternalError when net/http refused to send req as it is (see
//     [Client]), its info naming the problem and the URL;
//   - ConnectError when the connection could not be made (the dial or the
//     name lookup failed), CommError for any other failure.
//
// The info of a ConnectError or a CommError is "asynchttp: METHOD: " and
// the kind of failure, in words that name no URL, host or address:
// "connection refused", "name lookup failed", "host unreachable", "timed
// out" (a timeout of the HTTP client's, such as its Timeout), "connection
// reset", "TLS handshake failed", "connection closed before the answer",
// "answer cut short" (the connection ended in the body), "answer
// malformed", "answer header too long", "too many redirects", or else
// "could not connect" (ConnectError) or "request failed" (CommError). The
// text of the Go error names the upstream's host, port, path and query:
// it is no part of an answer a [Handler] sends to its client, who must
// not learn where and how the server connects. Cause is err, which a
// Handler logs, and errors.Is and errors.As find in the step's error.
//
// RequestError does not look at req's context: a Client fails the step
// with Timeout when the deadline of the step's context has passed, and
// reports nothing when its step was cancelled. A nil err gives nil; one
// whose methods panic, an InternalError that says so. A handler that does
// not run flows can map the failures of its own requests with it exactly
// as a Client does.
func RequestError(req *http.Request, err error) (mapped *asyncsteps.Error) {
	if err == nil {
		return nil
	}
	defer func() {
		if v := recover(); v != nil {
			// An error whose methods panic (a nil pointer given as an
			// error by the HTTP client's own code): a mistake of the
			// program's, named, instead of a panic that ends the request's
			// goroutine before Done. Not kept as Cause, whose text would
			// panic again.
			mapped = &asyncsteps.Error{Code: asyncsteps.InternalError,
				Info: fmt.Sprintf("asynchttp: reading the %T given as an error panicked: %v", unwrapURL(err), v)}
		}
	}()
	err = withoutOpaqueUserinfo(req, err)
	if problem := refusal(req, err); problem != "" {
		// Not a CommError, which the default of Retry retries in vain,
		// nor an InvalidRequest, which a Handler answers 400 unlogged:
		// the URL is the program's, and so is the mistake.
		return &asyncsteps.Error{Code: asyncsteps.InternalError, Info: "asynchttp: " + problem, Cause: err}
	}
	var coded *asyncsteps.Error
	var coder asyncsteps.FutoInCoder
	if errors.As(err, &coded) || errors.As(err, &coder) && givesCode(coder) {
		// A code the caller's own code chose (its RoundTripper, its
		// CheckRedirect, the reader of its request's body) stays its code,
		// as Await keeps it: not a CommError that a retry loop would
		// attempt again. A FutoInCoder that gives none chose nothing, as
		// ErrorFrom reads it: its error is mapped as any other here, not
		// by ErrorFrom's rules for Go errors. The *url.Error around it is
		// net/http's, which names the URL: the info is the code's own.
		e := asyncsteps.ErrorFrom(unwrapURL(err))
		if e.Cause != nil { // none for an error whose methods panic
			e.Cause = err
		}
		return e
	}
	code := asyncsteps.CommError
	var op *net.OpError
	var dns *net.DNSError
	if (errors.As(err, &op) && op.Op == "dial") || errors.As(err, &dns) {
		code = asyncsteps.ConnectError
	}
	return &asyncsteps.Error{Code: code, Info: "asynchttp: " + methodOf(req) + ": " + failure(err, code), Cause: err}
}

// unwrapURL returns the error that the *url.Error err wraps, or err if it
// is no *url.Error (or one that wraps nothing).
func unwrapURL(err error) error {
	if ue, ok := err.(*url.Error); ok && ue.Err != nil {
		return ue.Err
	}
	return err
}

// methodOf returns the method req is sent with.
func methodOf(req *http.Request) string {
	if req == nil || req.Method == "" {
		return http.MethodGet
	}
	return req.Method
}

// failure names the kind of failure err is, in fixed words (see
// RequestError); code is the one it is mapped to. It is the one
// classifier of HTTP failures: for a Client's infos, and for the Go
// errors whose text a Handler does not answer (see goErrorInfo). The
// network's kinds are netfail's, told by the Go error's types; an end of
// the connection is told apart by where it came, before the answer or in
// its body. net/http's own errors about an answer it could not read have
// no type of their own, and are told by their text, never shown. Any
// error of http.Client.Do is a *url.Error; one of reading the body is
// not.
func failure(err error, code string) string {
	_, sending := err.(*url.Error)
	inner := unwrapURL(err)
	kind := netfail.Kind(inner)
	switch {
	case kind == netfail.Closed, kind == "" && closedByServer(inner):
		if sending {
			return "connection closed before the answer"
		}
		return "answer cut short"
	case kind != "":
		return kind
	case inner.Error() == "http: server gave HTTP response to HTTPS client":
		return netfail.TLSHandshake
	case malformed(inner):
		return "answer malformed"
	}
	text := inner.Error()
	switch {
	case strings.Contains(text, "response headers exceeded"):
		return "answer header too long"
	case strings.HasPrefix(text, "stopped after ") && strings.HasSuffix(text, " redirects"):
		return "too many redirects"
	}
	return unnamedFailure(code)
}

// unnamedFailure names a failure of code that nothing else tells.
func unnamedFailure(code string) string {
	switch code {
	case asyncsteps.ConnectError:
		return "could not connect"
	case asyncsteps.Timeout:
		return netfail.TimedOut
	}
	return netfail.Unnamed
}

// closedByServer reports whether err says the server closed a connection
// the request was sent on, which net/http tells only in its text (HTTP/1
// and HTTP/2).
func closedByServer(err error) bool {
	text := err.Error()
	return strings.Contains(text, "server closed idle connection") || strings.Contains(text, "client connection lost")
}

// malformed reports whether err says the answer could not be read as
// HTTP: its status line, its header, its chunked body or its gzip
// encoding (which the transport decodes when it asked for it).
func malformed(err error) bool {
	var corrupt flate.CorruptInputError
	if errors.Is(err, gzip.ErrHeader) || errors.Is(err, gzip.ErrChecksum) || errors.As(err, &corrupt) {
		return true
	}
	text := err.Error()
	return strings.Contains(text, "malformed") || strings.Contains(text, "chunk length") ||
		strings.Contains(text, "chunked encoding")
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
