package otelsteps

import (
	"bytes"
	"reflect"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/asyncsteps/asyncsteps"
)

// infoPolicy is how much of an error's info the spans export: none if
// omit, else at most max bytes of it, all of it if max is 0. The zero
// value exports the infos as they are.
type infoPolicy struct {
	omit bool
	max  int
}

func infoPolicyOf(c Config) infoPolicy {
	switch {
	case c.OmitInfo:
		return infoPolicy{omit: true}
	case c.MaxInfoBytes == 0:
		return infoPolicy{max: DefaultMaxInfoBytes}
	case c.MaxInfoBytes < 0:
		return infoPolicy{}
	}
	return infoPolicy{max: c.MaxInfoBytes}
}

// ellipsis ends an info that was cut.
const ellipsis = "…"

// cut returns info, cut to at most p.max bytes, if longer, at a UTF-8
// character boundary, and ended with the ellipsis (if p.max leaves it
// room), so that a reader knows there was more. An info that is not
// UTF-8 is cut at most 3 bytes short of the boundary it would be cut at.
func (p infoPolicy) cut(info string) string {
	if p.max == 0 || len(info) <= p.max {
		return info
	}
	n, mark := p.max, ""
	if n > len(ellipsis) {
		n, mark = n-len(ellipsis), ellipsis
	}
	// info[n] is the first byte left out: back off the character it is
	// in the middle of, if any.
	for i := 1; i < utf8.UTFMax && n > 0 && !utf8.RuneStart(info[n]); i++ {
		n--
	}
	return info[:n] + mark
}

// describe returns the status description of a span that fails with err:
// err.Error(), "code: info", with the info as p exports it.
func (p infoPolicy) describe(err *asyncsteps.Error) string {
	switch {
	case p.omit || err.Info == "":
		return err.Code
	case p.max == 0 || len(err.Info) <= p.max:
		return err.Error() // as it is, with no allocation more
	}
	return err.Code + ": " + p.cut(err.Info)
}

// eventAttributes returns the attributes of err's step error event.
func (p infoPolicy) eventAttributes(err *asyncsteps.Error) trace.SpanStartEventOption {
	if p.omit {
		return trace.WithAttributes(CodeKey.String(err.Code))
	}
	return trace.WithAttributes(CodeKey.String(err.Code), InfoKey.String(p.cut(err.Info)))
}

// stackMaxOf returns the cap on exported stacks that c sets, 0 for none.
func stackMaxOf(c Config) int {
	switch {
	case c.MaxStackBytes == 0:
		return DefaultMaxStackBytes
	case c.MaxStackBytes < 0:
		return 0
	}
	return c.MaxStackBytes
}

// cutStack returns stack as a string, cut to at most max bytes, if longer
// and max is not 0: after its last whole line that fits with a line of
// the ellipsis after it. A cap too small for one whole line cuts as an
// info is cut.
func cutStack(stack []byte, max int) string {
	if max == 0 || len(stack) <= max {
		return string(stack)
	}
	if end := max - len(ellipsis); end > 0 {
		if i := bytes.LastIndexByte(stack[:end], '\n'); i >= 0 {
			return string(stack[:i+1]) + ellipsis
		}
	}
	return infoPolicy{max: max}.cut(string(stack))
}

// panicOf returns the panic that raised err: the *asyncsteps.PanicError
// that the engine makes the Cause of the InternalError of a panic in a
// callback or an Await function, with the stack of the goroutine at the
// panic. nil if err is nil or no panic's. The error an error handler
// raises in place of a panic's keeps it as its Cause too. Only Cause is
// looked at: reading further down the chain would call methods of the
// application's errors.
func panicOf(err *asyncsteps.Error) *asyncsteps.PanicError {
	if err == nil {
		return nil
	}
	p, _ := err.Cause.(*asyncsteps.PanicError)
	return p
}

// maxCopies bounds the walk of copiedPanicOf, as the engine bounds its
// own: a chain of *Error causes a user made into a loop ends there.
const maxCopies = 16

// copiedPanicOf returns the panic under the *asyncsteps.Error copies that
// err's Cause leads to, if any: the panic of another flow, whose error an
// Await, AwaitResult or AwaitFlow step copied (see the engine's error
// handlers, which make it the Cause of an error they raise in its place).
// Only *asyncsteps.Error causes are walked: no method of the
// application's errors is called.
func copiedPanicOf(err *asyncsteps.Error) *asyncsteps.PanicError {
	e, _ := err.Cause.(*asyncsteps.Error)
	for i := 0; e != nil; i++ {
		if p, ok := e.Cause.(*asyncsteps.PanicError); ok || i == maxCopies {
			return p
		}
		e, _ = e.Cause.(*asyncsteps.Error)
	}
	return nil
}

// addPanic adds to span the exception event of the panic p, as
// OpenTelemetry's semantic conventions have it: the type of the panic
// value, its message, which is the application's text and is exported as
// its infos are, and the stack of the goroutine at the panic, as
// runtime/debug.Stack prints it, if the engine recorded it.
func (t tracer) addPanic(span trace.Span, p *asyncsteps.PanicError, opts ...trace.EventOption) {
	attrs := make([]attribute.KeyValue, 0, 3)
	attrs = append(attrs, semconv.ExceptionType(typeName(p.Value)))
	if !t.infos.omit {
		attrs = append(attrs, semconv.ExceptionMessage(t.infos.cut(p.Error())))
	}
	if len(p.Stack) > 0 {
		attrs = append(attrs, semconv.ExceptionStacktrace(cutStack(p.Stack, t.stackMax)))
	}
	span.AddEvent(semconv.ExceptionEventName, append(opts, trace.WithAttributes(attrs...))...)
}

// typeName returns the fully qualified name of the dynamic type of v, as
// the semantic conventions ask of exception.type: "*errors.errorString",
// "string", "*example.com/app/db.QueryError", "runtime.boundsError".
func typeName(v any) string {
	t := reflect.TypeOf(v)
	if t == nil {
		return "<nil>"
	}
	stars := ""
	for t.Kind() == reflect.Pointer && t.Name() == "" {
		stars += "*"
		t = t.Elem()
	}
	if t.PkgPath() == "" || t.Name() == "" {
		return stars + t.String()
	}
	return stars + t.PkgPath() + "." + t.Name()
}
